package docs

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// repoRoot is the repository's top directory, seen from this package.
const repoRoot = "../.."

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Router", "router"},
		{"2. Request path", "2-request-path"},
		{"2.1 The member client", "21-the-member-client"},
		{"5. `kubectl sluice` (`cmd/kubectl-sluice`)", "5-kubectl-sluice-cmdkubectl-sluice"},
		{"Pressure (`internal/pressure`)", "pressure-internalpressure"},
		{"Scoring and admission contract", "scoring-and-admission-contract"},
		{"enginesim — an OpenAI-compatible engine simulator", "enginesim--an-openai-compatible-engine-simulator"},
		{"1.3 1000 concurrent SSE streams", "13-1000-concurrent-sse-streams"},
		{"snake_case & dashes-kept!", "snake_case--dashes-kept"},
		{"Cost: 1.5 µs × 16", "cost-15-µs--16"},
		{"See [the API](API.md) <em>now</em>", "see-the-api-now"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestStripCodeSpans(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a `[x](y)` b", "a code b"},
		{"``a ` b`` c", "code c"},
		{"unclosed ` tick [x](y)", "unclosed ` tick [x](y)"},
		{"`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`", "code"},
	} {
		if got := stripCodeSpans(tc.in); got != tc.want {
			t.Errorf("stripCodeSpans(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// target is a Markdown file every case's links may point at.
const target = "# Target\n\n## 1. Setup\n\nText.\n\n## 1. Setup\n\nAgain.\n\n### 1.1 Details\n\nSetext title\n------------\n\n```\n## Not a heading\n```\n"

func TestCheckMarkdown(t *testing.T) {
	for _, tc := range []struct {
		desc string
		page string
		// want are substrings of the problems, one per problem; none means
		// the page is valid.
		want []string
	}{
		{desc: "valid relative file link", page: "[t](T.md)"},
		{desc: "valid link to another file's heading", page: "[t](T.md#1-setup)"},
		{desc: "valid link to the second of two equal headings", page: "[t](T.md#1-setup-1)"},
		{desc: "valid link to a setext heading", page: "[t](T.md#setext-title)"},
		{desc: "valid link to a heading of the same file", page: "# Page\n\n## Local part\n\n[here](#local-part)"},
		{desc: "valid link up and into another directory", page: "![chart](../bench/chart.png)"},
		{desc: "valid link to a directory", page: "[samples](../config/samples/)"},
		{desc: "valid link with a title", page: `[t](T.md#target "Target")`},
		{desc: "valid link in angle brackets", page: "[t](<T.md>)"},
		{desc: "valid reference definition", page: "[t][x]\n\n[x]: T.md#1-setup"},
		{desc: "external links are not followed", page: "[a](https://example.com/x.md#nope) [b](mailto:a@b.c)"},
		{desc: "links in code spans are not links", page: "`[x](missing.md)` and ``[y](gone.md)``"},
		{desc: "links in fenced code are not links", page: "```md\n[x](missing.md)\n```\n~~~\n[y](gone.md)\n~~~"},
		{desc: "valid section pointers", page: "See T.md §1 and §1.1, or T.md §1."},
		{desc: "section pointers in code are not pointers", page: "`T.md §9`"},

		{desc: "missing file", page: "[t](MISSING.md)", want: []string{"MISSING.md: docs/MISSING.md does not exist"}},
		{desc: "missing anchor in another file", page: "[t](T.md#setup)", want: []string{"no heading of docs/T.md has the anchor #setup"}},
		{desc: "missing anchor in the same file", page: "# Page\n\n[t](#elsewhere)", want: []string{"no heading of docs/page.md has the anchor #elsewhere"}},
		{desc: "duplicate-heading anchor beyond the duplicates", page: "[t](T.md#1-setup-2)", want: []string{"anchor #1-setup-2"}},
		{desc: "anchor of a heading inside fenced code", page: "[t](T.md#not-a-heading)", want: []string{"anchor #not-a-heading"}},
		{desc: "anchor with the heading's case", page: "[t](T.md#Target)", want: []string{"anchor #Target"}},
		{desc: "anchor on a file that is not Markdown", page: "![c](../bench/chart.png#top)", want: []string{"not Markdown"}},
		{desc: "link leaving the repository", page: "[t](../../outside.md)", want: []string{"leaves the repository"}},
		{desc: "missing image", page: "![c](../bench/missing.png)", want: []string{"bench/missing.png does not exist"}},
		{desc: "missing file of a reference definition", page: "[x]: GONE.md", want: []string{"docs/GONE.md does not exist"}},
		{desc: "pointer to a missing section", page: "T.md §2", want: []string{"docs/T.md has no section 2"}},
		{desc: "pointer continued to a missing section", page: "T.md §1 and §3", want: []string{"has no section 3"}},
		{desc: "pointer to a missing file", page: "NONE.md §1", want: []string{"NONE.md does not exist"}},
		{desc: "every problem is reported", page: "[a](A.md) [b](T.md#b)", want: []string{"docs/A.md does not exist", "anchor #b"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fsys := fstest.MapFS{
				"docs/page.md":             {Data: []byte(tc.page)},
				"docs/T.md":                {Data: []byte(target)},
				"bench/chart.png":          {Data: []byte("png")},
				"config/samples/tier.yaml": {Data: []byte("kind: ReplicaTier")},
			}
			got := newChecker(fsys).checkMarkdown([]string{"docs/page.md"})
			if len(got) != len(tc.want) {
				t.Fatalf("problems = %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCheckSource(t *testing.T) {
	for _, tc := range []struct {
		desc string
		src  string
		want []string
	}{
		{desc: "valid citations", src: "// See docs/T.md#1-setup and docs/T.md.\n// As T.md §1.1 says.\n"},
		{desc: "missing file", src: "// See docs/NONE.md#x.\n", want: []string{"cites docs/NONE.md, which does not exist"}},
		{desc: "missing anchor", src: "x := 1 // docs/T.md#nope\n", want: []string{"no heading of docs/T.md has the anchor #nope"}},
		{desc: "missing section", src: "// T.md §7\n", want: []string{"has no section 7"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fsys := fstest.MapFS{
				"docs/T.md": {Data: []byte(target)},
				"x.go":      {Data: []byte(tc.src)},
			}
			got := newChecker(fsys).checkSource([]string{"x.go"})
			if len(got) != len(tc.want) {
				t.Fatalf("problems = %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCheckTestNames(t *testing.T) {
	fsys := fstest.MapFS{
		"docs/page.md": {Data: []byte("`TestKnown` and FuzzKnown cover it; see also `TestGone`.\n\n```sh\ngo test -bench BenchmarkMissing\n```\n")},
		"x_test.go":    {Data: []byte("package x\n\nfunc TestKnown(t *testing.T) {}\n\nfunc FuzzKnown(f *testing.F) {}\n\n// TestGone is only mentioned.\n")},
	}
	got := newChecker(fsys).checkTestNames([]string{"docs/page.md"}, []string{"x_test.go"})
	want := []string{"docs/page.md:1: names TestGone, which no Go file declares", "docs/page.md:4: names BenchmarkMissing, which no Go file declares"}
	if !slices.Equal(got, want) {
		t.Errorf("problems = %q, want %q", got, want)
	}
}

// validReadme lists docs/A.md and docs/B.md and lays out two paths.
const validReadme = `# project

## Layout

| path | what |
|---|---|
| ` + "`cmd/x`, `internal/y`" + ` | code |
| ` + "`docs/`" + ` | docs |

## Documentation

- [A](docs/A.md): first
- [B](docs/B.md#b): second
`

func TestCheckReadme(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		readme string
		extra  map[string]string
		want   []string
	}{
		{desc: "valid", readme: validReadme},
		{desc: "a doc missing from the list", readme: validReadme, extra: map[string]string{"docs/C.md": "# C"},
			want: []string{"does not link docs/C.md"}},
		{desc: "a layout path that does not exist", readme: strings.Replace(validReadme, "`internal/y`", "`internal/z`", 1),
			want: []string{"layout path internal/z does not exist"}},
		{desc: "no documentation section", readme: strings.Replace(validReadme, "## Documentation", "## Docs", 1),
			want: []string{"no \"## Documentation\" section"}},
		{desc: "a doc linked outside the documentation section only",
			readme: strings.Replace(validReadme, "- [B](docs/B.md#b): second\n", "", 1) + "\n## More\n\n[B](docs/B.md)\n",
			want:   []string{"does not link docs/B.md"}},
		{desc: "no layout section", readme: strings.Replace(validReadme, "## Layout", "## Files", 1),
			want: []string{"no \"## Layout\" section"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fsys := fstest.MapFS{
				"README.md":       {Data: []byte(tc.readme)},
				"docs/A.md":       {Data: []byte("# A")},
				"docs/B.md":       {Data: []byte("# B")},
				"cmd/x/main.go":   {Data: []byte("package main")},
				"internal/y/y.go": {Data: []byte("package y")},
			}
			for name, data := range tc.extra {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			got := newChecker(fsys).checkReadme()
			if len(got) != len(tc.want) {
				t.Fatalf("problems = %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestRepositoryDocs runs every check over the repository's own README.md,
// docs/*.md and Go source.
func TestRepositoryDocs(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	fsys := os.DirFS(root)
	names, err := markdownFiles(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 2 {
		t.Fatalf("found %q, want README.md and the docs", names)
	}
	var goFiles, ownFiles []string
	err = fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if slices.Contains([]string{".git", "bin", "out"}, name) {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case !strings.HasSuffix(name, ".go"):
		case path.Dir(name) == "test/docs":
			// This package's cases cite files that do not exist on
			// purpose; its files only declare tests the docs may name.
			ownFiles = append(ownFiles, name)
		default:
			goFiles = append(goFiles, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	c := newChecker(fsys)
	var problems []string
	problems = append(problems, c.checkMarkdown(names)...)
	problems = append(problems, c.checkReadme()...)
	problems = append(problems, c.checkSource(goFiles)...)
	problems = append(problems, c.checkTestNames(names, append(goFiles, ownFiles...))...)
	for _, p := range problems {
		t.Error(p)
	}
	if c.checked == 0 {
		t.Error("no link, pointer or citation was found")
	}
	t.Logf("followed %d links, pointers and citations in %d Markdown files and %d Go files", c.checked, len(names), len(goFiles))
}
