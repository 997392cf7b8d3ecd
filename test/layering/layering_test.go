// Package layering checks that the module's imports point down: the layers
// are the ones the README's package layout lists (its `layers` block), so the
// document and the check cannot drift apart.
package layering

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/taskaction/executor/"

// layers reads the README's fenced block that starts with "```layers": lines
// "N  pattern pattern …" (a pattern is a package path relative to the module,
// or a prefix ending in "/..."), and lines "apart  A… | B…": no package of A
// depends, even indirectly, on one of B.
type layers struct {
	rank  map[string]int // pattern → layer
	apart [][2][]string
}

func readLayers(t *testing.T, path string) layers {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := layers{rank: map[string]int{}}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```layers":
			in = true
			continue
		case in && line == "```":
			in = false
		}
		if !in || line == "" {
			continue
		}
		fields := strings.Fields(line)
		if fields[0] == "apart" {
			a, b, ok := strings.Cut(strings.Join(fields[1:], " "), "|")
			if !ok {
				t.Fatalf("README layers: %q: want `apart A… | B…`", line)
			}
			l.apart = append(l.apart, [2][]string{strings.Fields(a), strings.Fields(b)})
			continue
		}
		n, err := strconv.Atoi(fields[0])
		if err != nil {
			t.Fatalf("README layers: %q: want a layer number first", line)
		}
		for _, p := range fields[1:] {
			l.rank[p] = n
		}
	}
	if len(l.rank) == 0 {
		t.Fatal("README.md has no ```layers block")
	}
	return l
}

// match is the most specific pattern that covers pkg (relative path).
func match(pkg string, patterns map[string]int) (string, bool) {
	best := ""
	for p := range patterns {
		if p == pkg || (strings.HasSuffix(p, "/...") && (pkg == strings.TrimSuffix(p, "/...") || strings.HasPrefix(pkg, strings.TrimSuffix(p, "...")))) {
			if len(p) > len(best) {
				best = p
			}
		}
	}
	return best, best != ""
}

func covered(pkg string, patterns []string) bool {
	m := map[string]int{}
	for _, p := range patterns {
		m[p] = 0
	}
	_, ok := match(pkg, m)
	return ok
}

type goPackage struct {
	ImportPath string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T, root string) []goPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, "list", "-deps=false", "-json=ImportPath,GoFiles,Imports,Deps", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(p.GoFiles) > 0 { // packages of test files only import nothing of their own
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

func own(path string) (string, bool) { return strings.CutPrefix(path, module) }

// violations lists every import of pkgs that does not point down, every
// package in no layer, and every dependency the layers keep apart.
func violations(l layers, pkgs []goPackage) []string {
	var out []string
	layerOf := func(pkg string) (string, int, bool) {
		p, ok := match(pkg, l.rank)
		if !ok {
			out = append(out, fmt.Sprintf("package %s is in no layer of the README's package layout: add it there", pkg))
		}
		return p, l.rank[p], ok
	}
	for _, p := range pkgs {
		pkg, _ := own(p.ImportPath)
		unit, from, ok := layerOf(pkg)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			dep, mine := own(imp)
			if !mine {
				continue
			}
			// A tree (a pattern ending in "/...", the generated code) is one unit.
			if depUnit, to, ok := layerOf(dep); ok && to >= from && !(depUnit == unit && strings.HasSuffix(unit, "/...")) {
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d): imports must point to a lower layer", pkg, from, dep, to))
			}
		}
		for _, rule := range l.apart {
			if !covered(pkg, rule[0]) {
				continue
			}
			for _, d := range p.Deps {
				if dep, mine := own(d); mine && covered(dep, rule[1]) {
					out = append(out, fmt.Sprintf("%s depends on %s, which the README keeps apart from it", pkg, dep))
				}
			}
		}
	}
	return out
}

func TestImportsPointDown(t *testing.T) {
	root := filepath.Join("..", "..")
	l := readLayers(t, filepath.Join(root, "README.md"))
	pkgs := listPackages(t, root)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	for _, v := range violations(l, pkgs) {
		t.Error(v)
	}
}

// TestViolationsAreFound makes sure the check above can fail: an upward
// import, a sideways one, a package in no layer, and a dependency kept apart.
func TestViolationsAreFound(t *testing.T) {
	l := layers{
		rank:  map[string]int{"gen/...": 0, "api/v1": 1, "pkg/eventsvc": 4, "pkg/webhook": 7, "pkg/controller": 7},
		apart: [][2][]string{{[]string{"pkg/controller"}, []string{"pkg/eventsvc/..."}}},
	}
	pkgs := []goPackage{
		{ImportPath: module + "api/v1", Imports: []string{module + "gen/flyteidl2/core", "k8s.io/api/core/v1"}},
		{ImportPath: module + "gen/flyteidl2/workflow", Imports: []string{module + "gen/flyteidl2/core"}},
		{ImportPath: module + "gen/flyteidl2/core", Imports: []string{module + "api/v1"}},
		{ImportPath: module + "pkg/webhook", Imports: []string{module + "pkg/controller"}},
		{ImportPath: module + "pkg/controller", Deps: []string{module + "api/v1", module + "pkg/eventsvc"}},
		{ImportPath: module + "pkg/new"},
	}
	got := violations(l, pkgs)
	want := []string{
		"gen/flyteidl2/core (layer 0) imports api/v1 (layer 1)",
		"pkg/webhook (layer 7) imports pkg/controller (layer 7)",
		"pkg/controller depends on pkg/eventsvc",
		"package pkg/new is in no layer",
	}
	if len(got) != len(want) {
		t.Fatalf("violations %q; want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("violation %d = %q; want it to start with %q", i, got[i], w)
		}
	}
}
