package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// page is what the checker reads from one Markdown file.
type page struct {
	// lines are the file's lines, as written.
	lines []string
	// headings are the ATX and setext headings outside code blocks, in order.
	headings []heading
	// anchors are the headings' GitHub anchors, duplicates numbered.
	anchors map[string]bool
	// links are the relative link and image targets outside code.
	links []ref
	// pointers are the "FILE.md §N" section pointers outside code.
	pointers []ref
}

// heading is one heading of a page.
type heading struct {
	level int
	text  string
	line  int // 1-based.
}

// ref is one pointer found on a line: a link target, or a file and section.
type ref struct {
	line   int // 1-based.
	target string
	// section is the "N" or "N.M" of a "FILE.md §N" pointer.
	section string
}

var (
	// atxHeading is a "# Title" line; trailing closing hashes are removed
	// separately.
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*$`)
	// closingHashes is an ATX heading's optional closing sequence.
	closingHashes = regexp.MustCompile(`[ \t]+#+$`)
	// setextUnderline is the line under a setext heading: "===" for level 1,
	// "---" for level 2.
	setextUnderline = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	// fenceOpen is the start of a fenced code block.
	fenceOpen = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
	// inlineLink is the "](target)" or "](target "title")" tail of an inline
	// link or image.
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^()\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	// refDefinition is a link reference definition, "[label]: target".
	refDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// sectionPointer is "FILE.md §N", optionally continued by ", §M",
	// " and §M" or " or §M".
	sectionPointer = regexp.MustCompile(`\b([A-Z][A-Z0-9_]*\.md) §(\d+(?:\.\d+)*)((?:(?:,| and| or) §\d+(?:\.\d+)*)*)`)
	// sectionNumber is one "§N" of a pointer's continuation.
	sectionNumber = regexp.MustCompile(`§(\d+(?:\.\d+)*)`)
	// urlScheme tells an absolute URL (http:, mailto:, ...) from a path.
	urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// inlineMarkupLink is a link or image inside heading text; the anchor is
	// made of its text only.
	inlineMarkupLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// htmlTag is an HTML tag inside heading text, which the anchor leaves out.
	htmlTag = regexp.MustCompile(`<[^>]+>`)
	// goDocRef is a docs/FILE.md or docs/FILE.md#anchor citation in Go source.
	goDocRef = regexp.MustCompile(`docs/([A-Za-z0-9_-]+\.md)(?:#([A-Za-z0-9_-]+))?`)
	// testName is a Go test, fuzz target or benchmark named in a page.
	testName = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*`)
	// testFunc declares a Go test, fuzz target or benchmark.
	testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)\(`)
)

// parse reads one Markdown file. Code blocks (fenced) and code spans are
// skipped when looking for headings, links and pointers.
func parse(src string) *page {
	p := &page{lines: strings.Split(src, "\n"), anchors: map[string]bool{}}
	var fence string // the open fence's marker run; empty outside a fence.
	prevText := ""   // the previous line when it can start a setext heading.
	for i, raw := range p.lines {
		line := strings.TrimRight(raw, "\r")
		n := i + 1
		if fence != "" {
			if t := strings.TrimLeft(line, " "); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]+" \t") == "" {
				fence = ""
			}
			continue
		}
		if m := fenceOpen.FindStringSubmatch(line); m != nil {
			fence, prevText = m[1], ""
			continue
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			text := closingHashes.ReplaceAllString(m[2], "")
			if strings.Trim(text, "#") == "" {
				text = ""
			}
			p.headings = append(p.headings, heading{level: len(m[1]), text: text, line: n})
			prevText = ""
			continue
		}
		if m := setextUnderline.FindStringSubmatch(line); m != nil && prevText != "" {
			level := 1
			if m[1][0] == '-' {
				level = 2
			}
			p.headings = append(p.headings, heading{level: level, text: strings.TrimSpace(prevText), line: n - 1})
			prevText = ""
			continue
		}
		plain := stripCodeSpans(line)
		for _, m := range inlineLink.FindAllStringSubmatch(plain, -1) {
			p.links = append(p.links, ref{line: n, target: strings.Trim(m[1], "<>")})
		}
		if m := refDefinition.FindStringSubmatch(plain); m != nil {
			p.links = append(p.links, ref{line: n, target: strings.Trim(m[1], "<>")})
		}
		p.pointers = append(p.pointers, sectionPointers(plain, n)...)
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "", strings.HasPrefix(trimmed, "|"), strings.HasPrefix(trimmed, ">"),
			strings.HasPrefix(trimmed, "- "), strings.HasPrefix(trimmed, "* "), strings.HasPrefix(trimmed, "<"):
			// Blank lines, table rows, quotes, list items and HTML do not
			// start a setext heading here.
			prevText = ""
		default:
			prevText = line
		}
	}
	counts := map[string]int{}
	for _, h := range p.headings {
		s := slug(h.text)
		if c := counts[s]; c > 0 {
			p.anchors[fmt.Sprintf("%s-%d", s, c)] = true
		} else {
			p.anchors[s] = true
		}
		counts[s]++
	}
	return p
}

// sectionPointers finds the "FILE.md §N" pointers of one line.
func sectionPointers(line string, n int) []ref {
	var out []ref
	for _, m := range sectionPointer.FindAllStringSubmatch(line, -1) {
		out = append(out, ref{line: n, target: m[1], section: m[2]})
		for _, more := range sectionNumber.FindAllStringSubmatch(m[3], -1) {
			out = append(out, ref{line: n, target: m[1], section: more[1]})
		}
	}
	return out
}

// stripCodeSpans replaces every code span of line by the word "code", so
// that brackets, parentheses and pointers inside code are not read as links.
// An opening backtick run without a matching closing run is literal text.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		run := 1
		for i+run < len(line) && line[i+run] == '`' {
			run++
		}
		closing := -1
		for j := i + run; j < len(line); {
			if line[j] != '`' {
				j++
				continue
			}
			k := 1
			for j+k < len(line) && line[j+k] == '`' {
				k++
			}
			if k == run {
				closing = j
				break
			}
			j += k
		}
		if closing < 0 {
			b.WriteString(line[i : i+run])
			i += run
			continue
		}
		b.WriteString("code")
		i = closing + run
	}
	return b.String()
}

// slug is GitHub's anchor for a heading's text: the text as rendered
// (link and image markup reduced to their text, HTML tags dropped),
// lowercased, every space turned into "-", and every character that is not
// a letter, a digit, "-" or "_" dropped.
func slug(text string) string {
	text = inlineMarkupLink.ReplaceAllString(text, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-', r == '_', unicode.IsLetter(r), unicode.IsNumber(r), unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hasSection reports whether p has a heading numbered section, such as
// "2. Request path" for "2" or "2.1 The member client" for "2.1".
func (p *page) hasSection(section string) bool {
	for _, h := range p.headings {
		if h.text == section || strings.HasPrefix(h.text, section+". ") || strings.HasPrefix(h.text, section+" ") {
			return true
		}
	}
	return false
}

// checker checks pointers between the files of one tree.
type checker struct {
	fsys  fs.FS
	pages map[string]*page
	// checked counts the links, pointers and citations followed.
	checked int
}

func newChecker(fsys fs.FS) *checker {
	return &checker{fsys: fsys, pages: map[string]*page{}}
}

// page returns the parsed Markdown file at name, reading it once.
func (c *checker) page(name string) (*page, error) {
	if p, ok := c.pages[name]; ok {
		return p, nil
	}
	b, err := fs.ReadFile(c.fsys, name)
	if err != nil {
		return nil, err
	}
	p := parse(string(b))
	c.pages[name] = p
	return p, nil
}

// resolve turns a link target found in file from into a path in the tree
// and an anchor. ok is false for targets the checker does not follow
// (absolute URLs); problem is set when the target cannot be a path in the
// tree.
func resolve(from, target string) (name, anchor string, ok bool, problem string) {
	if urlScheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "", "", false, ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	if i := strings.IndexByte(file, '?'); i >= 0 {
		file = file[:i]
	}
	if file == "" {
		return from, anchor, true, ""
	}
	unescaped, err := url.PathUnescape(file)
	if err != nil {
		return "", "", false, fmt.Sprintf("link %s: bad escape", target)
	}
	if strings.HasPrefix(unescaped, "/") {
		name = path.Clean(strings.TrimPrefix(unescaped, "/"))
	} else {
		name = path.Join(path.Dir(from), unescaped)
	}
	if name == ".." || strings.HasPrefix(name, "../") {
		return "", "", false, fmt.Sprintf("link %s: leaves the repository", target)
	}
	return name, anchor, true, ""
}

// checkAnchor reports a problem when anchor is not a heading anchor of the
// Markdown file name.
func (c *checker) checkAnchor(name, anchor string) string {
	if !strings.HasSuffix(name, ".md") {
		return fmt.Sprintf("anchor #%s on %s, which is not Markdown", anchor, name)
	}
	p, err := c.page(name)
	if err != nil {
		return fmt.Sprintf("cannot read %s: %v", name, err)
	}
	if !p.anchors[anchor] {
		return fmt.Sprintf("no heading of %s has the anchor #%s", name, anchor)
	}
	return ""
}

// checkTarget reports a problem when the link target, found in file from,
// does not resolve to an existing file and (with an anchor) heading.
func (c *checker) checkTarget(from, target string) string {
	c.checked++
	name, anchor, ok, problem := resolve(from, target)
	if problem != "" || !ok {
		return problem
	}
	if _, err := fs.Stat(c.fsys, name); err != nil {
		return fmt.Sprintf("link %s: %s does not exist", target, name)
	}
	if anchor == "" {
		return ""
	}
	if p := c.checkAnchor(name, anchor); p != "" {
		return fmt.Sprintf("link %s: %s", target, p)
	}
	return ""
}

// docName is the file a bare "FILE.md" names: docs/FILE.md when it
// exists, else FILE.md at the top of the tree.
func (c *checker) docName(file string) string {
	if _, err := fs.Stat(c.fsys, path.Join("docs", file)); err == nil {
		return path.Join("docs", file)
	}
	return file
}

// checkPointer reports a problem when a "FILE.md §N" pointer names no
// numbered section of the file.
func (c *checker) checkPointer(r ref) string {
	c.checked++
	name := c.docName(r.target)
	p, err := c.page(name)
	if err != nil {
		return fmt.Sprintf("pointer %s §%s: %s does not exist", r.target, r.section, name)
	}
	if !p.hasSection(r.section) {
		return fmt.Sprintf("pointer %s §%s: %s has no section %s", r.target, r.section, name, r.section)
	}
	return ""
}

// checkMarkdown checks every link and pointer of the Markdown files names.
func (c *checker) checkMarkdown(names []string) []string {
	var problems []string
	for _, name := range names {
		p, err := c.page(name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: cannot read: %v", name, err))
			continue
		}
		for _, l := range p.links {
			if msg := c.checkTarget(name, l.target); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", name, l.line, msg))
			}
		}
		for _, r := range p.pointers {
			if msg := c.checkPointer(r); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", name, r.line, msg))
			}
		}
	}
	return problems
}

// checkSource checks the docs/FILE.md#anchor citations and "FILE.md §N"
// pointers in the text files names (Go source).
func (c *checker) checkSource(names []string) []string {
	var problems []string
	for _, name := range names {
		b, err := fs.ReadFile(c.fsys, name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: cannot read: %v", name, err))
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range goDocRef.FindAllStringSubmatch(line, -1) {
				c.checked++
				doc := path.Join("docs", m[1])
				msg := ""
				if _, err := fs.Stat(c.fsys, doc); err != nil {
					msg = fmt.Sprintf("cites %s, which does not exist", doc)
				} else if m[2] != "" {
					msg = c.checkAnchor(doc, m[2])
				}
				if msg != "" {
					problems = append(problems, fmt.Sprintf("%s:%d: %s", name, i+1, msg))
				}
			}
			for _, r := range sectionPointers(line, i+1) {
				if msg := c.checkPointer(r); msg != "" {
					problems = append(problems, fmt.Sprintf("%s:%d: %s", name, i+1, msg))
				}
			}
		}
	}
	return problems
}

// checkTestNames reports every test, fuzz target or benchmark that a
// Markdown file of pages names (code included) and no Go file of goFiles
// declares, so a page never cites a test that was renamed or removed.
func (c *checker) checkTestNames(pages, goFiles []string) []string {
	declared := map[string]bool{}
	for _, name := range goFiles {
		b, err := fs.ReadFile(c.fsys, name)
		if err != nil {
			return []string{fmt.Sprintf("%s: cannot read: %v", name, err)}
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			declared[m[1]] = true
		}
	}
	var problems []string
	for _, name := range pages {
		p, err := c.page(name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: cannot read: %v", name, err))
			continue
		}
		for i, line := range p.lines {
			for _, test := range testName.FindAllString(line, -1) {
				c.checked++
				if !declared[test] {
					problems = append(problems, fmt.Sprintf("%s:%d: names %s, which no Go file declares", name, i+1, test))
				}
			}
		}
	}
	return problems
}

// section returns the lines of the level-2 section of p titled title
// (from its heading to the next heading of level 1 or 2), with the line
// number of its heading; ok is false when p has no such section.
func (p *page) section(title string) (start, end int, ok bool) {
	for i, h := range p.headings {
		if h.level != 2 || h.text != title {
			continue
		}
		end = len(p.lines) + 1
		for _, next := range p.headings[i+1:] {
			if next.level <= 2 {
				end = next.line
				break
			}
		}
		return h.line, end, true
	}
	return 0, 0, false
}

// codeSpan is one `code span` of a table cell.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// checkReadme checks README.md's "Documentation" list, which must link
// every file in docs/, and its "Layout" table, whose first column's paths
// must exist.
func (c *checker) checkReadme() []string {
	const readme = "README.md"
	p, err := c.page(readme)
	if err != nil {
		return []string{fmt.Sprintf("%s: cannot read: %v", readme, err)}
	}
	var problems []string

	start, end, ok := p.section("Documentation")
	if !ok {
		problems = append(problems, readme+": no \"## Documentation\" section listing the docs")
	} else {
		listed := map[string]bool{}
		for _, l := range p.links {
			if l.line > start && l.line < end {
				if name, _, ok, _ := resolve(readme, l.target); ok {
					listed[name] = true
				}
			}
		}
		entries, err := fs.ReadDir(c.fsys, "docs")
		if err != nil {
			problems = append(problems, fmt.Sprintf("cannot list docs/: %v", err))
		}
		for _, e := range entries {
			if name := path.Join("docs", e.Name()); !e.IsDir() && !listed[name] {
				problems = append(problems, fmt.Sprintf("%s: the Documentation section does not link %s", readme, name))
			}
		}
	}

	start, end, ok = p.section("Layout")
	if !ok {
		return append(problems, readme+": no \"## Layout\" section")
	}
	rows := 0
	for n := start + 1; n < end; n++ {
		line := strings.TrimSpace(p.lines[n-1])
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for _, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			rows++
			name := strings.TrimSuffix(m[1], "/")
			if _, err := fs.Stat(c.fsys, name); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: layout path %s does not exist", readme, n, m[1]))
			}
		}
	}
	if rows == 0 {
		problems = append(problems, readme+": the Layout table lists no path")
	}
	return problems
}

// markdownFiles lists README.md and every docs/*.md of fsys.
func markdownFiles(fsys fs.FS) ([]string, error) {
	names, err := fs.Glob(fsys, "docs/*.md")
	if err != nil {
		return nil, err
	}
	return append([]string{"README.md"}, slices.Sorted(slices.Values(names))...), nil
}
