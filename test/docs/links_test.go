package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
)

var (
	// linkRE matches an inline Markdown link or image: [text](target) or
	// ![alt](target), the target without spaces, an optional title after.
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// headingRE matches an ATX heading.
	headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	// codeSpanRE matches an inline code span.
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	// inlineLinkTextRE matches a link inside a heading, keeping its text.
	inlineLinkTextRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// citationRE matches a docs/ citation in Go code, with its anchor.
	citationRE = regexp.MustCompile(`docs/([A-Za-z0-9_-]+\.md)(#[A-Za-z0-9_-]+)?`)
	// backtickedRE matches a backticked word, as the layout table writes paths.
	backtickedRE = regexp.MustCompile("`([^`]+)`")
)

// slug is GitHub's anchor for a heading's text: inline code and links keep
// their text, letters are lowercased, spaces become '-', and everything but
// letters, digits, '-' and '_' is dropped.
func slug(heading string) string {
	heading = inlineLinkTextRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// page is what the checker reads of one Markdown file.
type page struct {
	anchors map[string]bool
	links   []link
}

// link is one link of a page.
type link struct {
	line   int
	target string
}

// readPage parses a Markdown file: its headings' anchors (a repeated
// heading gets -1, -2, … as GitHub numbers them) and its links, outside
// fenced code blocks and code spans.
func readPage(text string) page {
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			text := strings.ReplaceAll(m[2], "`", "")
			s := slug(text)
			if k := seen[s]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				p.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, ""), -1) {
			p.links = append(p.links, link{line: n, target: m[1]})
		}
	}
	return p
}

// external reports whether a link target leaves the repository.
func external(target string) bool {
	return strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:")
}

// checker resolves links within one file system, reading each page once.
type checker struct {
	fsys  fs.FS
	pages map[string]*page
}

func newChecker(fsys fs.FS) *checker { return &checker{fsys: fsys, pages: map[string]*page{}} }

// page returns the parsed Markdown file name, or an error when it cannot
// be read.
func (c *checker) page(name string) (*page, error) {
	if p, ok := c.pages[name]; ok {
		return p, nil
	}
	b, err := fs.ReadFile(c.fsys, name)
	if err != nil {
		return nil, err
	}
	p := readPage(string(b))
	c.pages[name] = &p
	return &p, nil
}

// resolve checks one target (a path relative to the directory dir, an
// optional #anchor, or both) and returns why it does not resolve.
func (c *checker) resolve(dir, target string) error {
	file, anchor, _ := strings.Cut(target, "#")
	name := file
	if file != "" {
		name = path.Clean(path.Join(dir, file))
		if name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("%s leaves the repository", target)
		}
		if _, err := fs.Stat(c.fsys, name); err != nil {
			return fmt.Errorf("%s: no such file or directory", target)
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(name, ".md") {
		return fmt.Errorf("%s: an anchor into a file that is not Markdown", target)
	}
	p, err := c.page(name)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if !p.anchors[anchor] {
		return fmt.Errorf("%s: %s has no heading with anchor #%s", target, name, anchor)
	}
	return nil
}

// checkPage returns every link of the Markdown file name that does not
// resolve; a link to "#x" refers to name itself.
func (c *checker) checkPage(name string) []string {
	p, err := c.page(name)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	var bad []string
	for _, l := range p.links {
		if external(l.target) {
			continue
		}
		target := l.target
		if strings.HasPrefix(target, "#") {
			target = path.Base(name) + target
		}
		if err := c.resolve(path.Dir(name), target); err != nil {
			bad = append(bad, fmt.Sprintf("%s:%d: %v", name, l.line, err))
		}
	}
	return bad
}

// unlisted returns the docs that README does not link to.
func (c *checker) unlisted(docs []string) []string {
	readme, err := c.page("README.md")
	if err != nil {
		return []string{"README.md: " + err.Error()}
	}
	linked := map[string]bool{}
	for _, l := range readme.links {
		file, _, _ := strings.Cut(l.target, "#")
		linked[path.Clean(file)] = true
	}
	var missing []string
	for _, d := range docs {
		if !linked[d] {
			missing = append(missing, d)
		}
	}
	return missing
}

// layoutPaths returns the backticked paths of the first column of README's
// layout table (the table after the "## Layout" heading).
func layoutPaths(readme string) []string {
	var paths []string
	in := false
	for line := range strings.Lines(readme) {
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.TrimSpace(line) == "## Layout"
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(line, "|")
			if len(cells) < 3 {
				continue
			}
			for _, m := range backtickedRE.FindAllStringSubmatch(cells[1], -1) {
				paths = append(paths, m[1])
			}
		}
	}
	return paths
}

// goCitations returns each docs/ citation in the Go files of fsys as
// "file:line: target".
func goCitations(t *testing.T, fsys fs.FS) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// This package's own cases name files that do not exist.
		if d.IsDir() && (name == ".git" || name == "bin" || name == "out" || name == "testdata" || name == "test/docs") {
			return fs.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range citationRE.FindAllStringSubmatch(line, -1) {
				out[fmt.Sprintf("%s:%d", name, i+1)] = "docs/" + m[1] + m[2]
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"2. Request path":                   "2-request-path",
		"2.1 The member client":             "21-the-member-client",
		"Readiness (internal/readiness)":    "readiness-internalreadiness",
		"The model name sent upstream":      "the-model-name-sent-upstream",
		"Quiesce, readmit, drain, intent":   "quiesce-readmit-drain-intent",
		"enginesim — an engine simulator":   "enginesim--an-engine-simulator",
		"Using [kubectl](https://k8s.io) x": "using-kubectl-x",
		"snake_case and CAPS":               "snake_case-and-caps",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestChecker proves the checker catches each kind of broken link and
// accepts each valid form, on in-memory files.
func TestChecker(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte("# Top\n\n[ops](docs/OPS.md) [api](docs/API.md#spec)\n")},
		"docs/API.md": {Data: []byte("# API\n\n## Spec\n\n## Status\n\n### Example\n\n## Status\n\n### Example\n\n" +
			"```sh\n# not a heading\n[not a link](NOPE.md)\n```\n")},
		"docs/OPS.md": {Data: []byte("# Ops\n")},
		"bench/x.png": {Data: []byte("png")},
	}
	tests := []struct {
		desc, body string
		wantErr    string // empty: resolves.
	}{
		{"file", "[a](API.md)", ""},
		{"file and anchor", "[a](API.md#spec)", ""},
		{"heading with code", "[a](OPS.md#ops)", ""},
		{"duplicate heading, second", "[a](API.md#status-1)", ""},
		{"duplicate heading, second of a repeated subheading", "[a](API.md#example-1)", ""},
		{"same-file anchor", "# Here\n[a](#here)", ""},
		{"parent directory", "[a](../bench/x.png)", ""},
		{"image", "![chart](../bench/x.png)", ""},
		{"external", "[a](https://example.com/missing.md)", ""},
		{"link inside a code span is not a link", "`[a](MISSING.md)`", ""},
		{"link inside a fenced block is not a link", "```\n[a](MISSING.md)\n```", ""},
		{"missing file", "[a](MISSING.md)", "no such file"},
		{"missing anchor", "[a](API.md#nope)", "no heading with anchor #nope"},
		{"duplicate heading beyond its count", "[a](API.md#status-2)", "no heading with anchor #status-2"},
		{"anchor of a heading inside a fence", "[a](API.md#not-a-heading)", "no heading"},
		{"missing same-file anchor", "# Here\n[a](#there)", "no heading with anchor #there"},
		{"outside the repository", "[a](../../etc/passwd)", "leaves the repository"},
		{"anchor into a non-Markdown file", "[a](../bench/x.png#top)", "not Markdown"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			fs := maps(fsys, "docs/PAGE.md", tt.body)
			bad := newChecker(fs).checkPage("docs/PAGE.md")
			switch {
			case tt.wantErr == "" && len(bad) > 0:
				t.Fatalf("want no error, got %q", bad)
			case tt.wantErr != "" && (len(bad) != 1 || !strings.Contains(bad[0], tt.wantErr)):
				t.Fatalf("want one error containing %q, got %q", tt.wantErr, bad)
			}
		})
	}

	t.Run("unlisted doc", func(t *testing.T) {
		got := newChecker(fsys).unlisted([]string{"docs/API.md", "docs/OPS.md", "docs/NEW.md"})
		if !slices.Equal(got, []string{"docs/NEW.md"}) {
			t.Fatalf("unlisted = %q, want [docs/NEW.md]", got)
		}
	})
	t.Run("layout paths", func(t *testing.T) {
		readme := "## Layout\n\n| path | what |\n|---|---|\n| `api/v1`, `cmd/x` | a `not/a/path` |\n\n## Next\n| `other` | x |\n"
		if got := layoutPaths(readme); !slices.Equal(got, []string{"api/v1", "cmd/x"}) {
			t.Fatalf("layoutPaths = %q", got)
		}
	})
}

// maps returns a copy of fsys with one more file.
func maps(fsys fstest.MapFS, name, body string) fstest.MapFS {
	out := fstest.MapFS{name: {Data: []byte(body)}}
	for k, v := range fsys {
		out[k] = v
	}
	return out
}

// repository is the repository root, two directories up.
func repository(t *testing.T) fs.FS {
	t.Helper()
	if _, err := os.Stat("../../go.mod"); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	return os.DirFS("../..")
}

// TestRepositoryDocs runs the checks on the repository's own files.
func TestRepositoryDocs(t *testing.T) {
	fsys := repository(t)
	docs, err := fs.Glob(fsys, "docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs found: %v", err)
	}
	c := newChecker(fsys)
	var bad []string
	for _, name := range append([]string{"README.md"}, docs...) {
		bad = append(bad, c.checkPage(name)...)
	}
	for _, d := range c.unlisted(docs) {
		bad = append(bad, "README.md does not link to "+d)
	}
	readme, err := fs.ReadFile(fsys, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	paths := layoutPaths(string(readme))
	if len(paths) == 0 {
		bad = append(bad, "README.md has no layout table")
	}
	for _, p := range paths {
		if _, err := fs.Stat(fsys, strings.TrimSuffix(p, "/")); err != nil {
			bad = append(bad, "README.md layout table: "+p+" does not exist")
		}
	}
	for at, target := range goCitations(t, fsys) {
		if err := c.resolve(".", target); err != nil {
			bad = append(bad, at+": "+err.Error())
		}
	}
	slices.Sort(bad)
	for _, b := range bad {
		t.Error(b)
	}
}
