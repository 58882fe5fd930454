//go:build ignore

// listtests prints the names of franz-go's kgo integration tests: the
// top-level Test functions in pkg/kgo's _test.go files that reach a live
// broker, one per line, sorted. A test counts as an integration test when
// it references, directly or through test helpers in the same package, one
// of the helpers that talk to $KGO_SEEDS (adm, newTestClient, tmpTopic, ...)
// or the SCRAM/OAUTH seed variables. Everything else is a unit test of kgo
// itself and says nothing about the broker.
//
//	go run integration/compat/kgo/listtests.go [-v] <dir of pkg/kgo>
//
// With -v each line is "name<TAB>file<TAB>root helper reached".
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// roots are the package-level identifiers in pkg/kgo's test helpers that
// connect to the broker under test.
var roots = map[string]bool{
	"adm":                     true,
	"newTestClient":           true,
	"testClientOpts":          true,
	"getSeedBrokers":          true,
	"tmpTopic":                true,
	"tmpTopicPartitions":      true,
	"tmpNamedTopicPartitions": true,
	"waitForTopic":            true,
	"tmpGroup":                true,
	"tmpShareGroup":           true,
	"internalTopic":           true,
	"scramSeeds":              true,
	"oauthSeeds":              true,
}

func main() {
	verbose := flag.Bool("v", false, "print file and the root helper reached")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: listtests [-v] <pkg/kgo dir>")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		fmt.Fprintf(os.Stderr, "listtests: no _test.go files in %s (%v)\n", dir, err)
		os.Exit(1)
	}

	// refs: declaration key -> identifiers it mentions. Functions are
	// keyed by name, methods by ".name" (receiver types are not resolved:
	// a selector x.m counts as a reference to every test-file method m,
	// which can only over-report).
	refs := map[string]map[string]bool{}
	declFile := map[string]string{}
	var tests []string
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			fmt.Fprintf(os.Stderr, "listtests: %v\n", err)
			os.Exit(1)
		}
		for _, d := range f.Decls {
			var key string
			var node ast.Node = d
			switch d := d.(type) {
			case *ast.FuncDecl:
				key = d.Name.Name
				if d.Recv != nil {
					key = "." + key
				} else if strings.HasPrefix(key, "Test") && key != "TestMain" && isTestSig(d) {
					tests = append(tests, key)
				}
			case *ast.GenDecl: // package-level vars (e.g. func literals)
				if d.Tok != token.VAR {
					continue
				}
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for _, n := range vs.Names {
						collect(refs, n.Name, vs)
						declFile[n.Name] = filepath.Base(path)
					}
				}
				continue
			default:
				continue
			}
			collect(refs, key, node)
			declFile[key] = filepath.Base(path)
		}
	}

	// reach[k] is the root k reaches ("" if none), memoised DFS.
	reach := map[string]string{}
	visiting := map[string]bool{}
	var visit func(k string) string
	visit = func(k string) string {
		if roots[k] {
			return k
		}
		if r, ok := reach[k]; ok {
			return r
		}
		if visiting[k] {
			return ""
		}
		visiting[k] = true
		defer delete(visiting, k)
		r := ""
		for _, c := range sortedKeys(refs[k]) {
			if r = visit(c); r != "" {
				break
			}
		}
		reach[k] = r
		return r
	}

	sort.Strings(tests)
	for _, t := range tests {
		if r := visit(t); r != "" {
			if *verbose {
				fmt.Printf("%s\t%s\t%s\n", t, declFile[t], r)
			} else {
				fmt.Println(t)
			}
		}
	}
}

func isTestSig(d *ast.FuncDecl) bool {
	p := d.Type.Params.List
	if len(p) != 1 {
		return false
	}
	star, ok := p[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}

func collect(refs map[string]map[string]bool, key string, n ast.Node) {
	m := refs[key]
	if m == nil {
		m = map[string]bool{}
		refs[key] = m
	}
	var walk func(n ast.Node) bool
	walk = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if n.Name != key && n.Name != "init" {
				m[n.Name] = true
			}
		case *ast.SelectorExpr:
			// x.m names a method or field m, never the package-level m.
			m["."+n.Sel.Name] = true
			ast.Inspect(n.X, walk)
			return false
		}
		return true
	}
	ast.Inspect(n, walk)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
