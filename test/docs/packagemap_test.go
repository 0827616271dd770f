package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// modulePath is the module whose packages the map lists.
const modulePath = "github.com/sluice-dev/sluice"

// packageMap reads the "Package map" table of a page: each row's packages
// (first column) and the packages they may import (last column; "nothing"
// is none). Paths are relative to the module.
func packageMap(p *page) (allowed map[string][]string, problems []string) {
	start, end, ok := p.section("Package map")
	if !ok {
		return nil, []string{`no "## Package map" section`}
	}
	allowed = map[string][]string{}
	for n := start + 1; n < end; n++ {
		line := strings.TrimSpace(p.lines[n-1])
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		var may []string
		for _, m := range codeSpan.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			may = append(may, m[1])
		}
		if len(may) == 0 && strings.TrimSpace(cells[len(cells)-1]) != "nothing" {
			problems = append(problems, fmt.Sprintf("line %d: the last column names no package and is not \"nothing\"", n))
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			if _, dup := allowed[m[1]]; dup {
				problems = append(problems, fmt.Sprintf("line %d: %s has a second row", n, m[1]))
			}
			allowed[m[1]] = may
		}
	}
	return allowed, problems
}

// checkImports compares an import graph (each package of the module and
// the module's packages it imports, paths relative to the module) with the
// map.
func checkImports(allowed, graph map[string][]string) []string {
	var problems []string
	for _, pkg := range slices.Sorted(maps.Keys(graph)) {
		may, ok := allowed[pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("package %s has no row in the package map", pkg))
			continue
		}
		for _, imp := range graph[pkg] {
			if !slices.Contains(may, imp) {
				problems = append(problems, fmt.Sprintf("%s imports %s, which its row does not allow", pkg, imp))
			}
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(allowed)) {
		if _, ok := graph[pkg]; !ok {
			problems = append(problems, fmt.Sprintf("the package map lists %s, which is not a package of the module", pkg))
		}
	}
	return problems
}

// importGraph lists the module's packages and the module's packages each
// one's non-test files import.
func importGraph(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], modulePath+"/")
		graph[pkg] = []string{}
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, modulePath+"/"); ok {
				graph[pkg] = append(graph[pkg], rel)
			}
		}
	}
	return graph
}

func TestCheckImports(t *testing.T) {
	p := parse("# A\n\n## Package map\n\n| package | owns | may import |\n|---|---|---|\n" +
		"| `a` | leaf | nothing |\n| `b`, `c` | core | `a` |\n| `d` | gone | nothing |\n| `e` | bad | all of them |\n\n## Next\n\n| `f` | not in the map | nothing |\n")
	allowed, problems := packageMap(p)
	if want := []string{`line 10: the last column names no package and is not "nothing"`}; !slices.Equal(problems, want) {
		t.Fatalf("packageMap problems %q, want %q", problems, want)
	}
	graph := map[string][]string{"a": {}, "b": {"a"}, "c": {"a", "b"}, "e": {}, "f": {}}
	want := []string{
		"c imports b, which its row does not allow",
		"package f has no row in the package map",
		"the package map lists d, which is not a package of the module",
	}
	if got := checkImports(allowed, graph); !slices.Equal(got, want) {
		t.Fatalf("checkImports = %q\nwant %q", got, want)
	}
	if _, problems := packageMap(parse("# A\n")); len(problems) != 1 {
		t.Fatalf("a page without the map: %q", problems)
	}
}

// TestPackageMap holds the module's import graph to the package map of
// docs/ARCHITECTURE.md.
func TestPackageMap(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md")) //nolint:gosec // the repository's own page.
	if err != nil {
		t.Fatal(err)
	}
	allowed, problems := packageMap(parse(string(src)))
	problems = append(problems, checkImports(allowed, importGraph(t, root))...)
	for _, p := range problems {
		t.Error("docs/ARCHITECTURE.md: " + p)
	}
	if len(allowed) < 10 {
		t.Errorf("the package map lists %d packages", len(allowed))
	}
}
