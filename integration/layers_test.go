package integration

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// weir's packages import one way: cmd → kafka → broker → {coalescer,
// raft, log, config}. kafka speaks the protocol and reaches the domain
// only through broker; broker owns the domain and uses the consensus
// plumbing (raft), the log and the coalescer; of those, raft may use log
// and config, the coalescer log, and log and config nothing of weir.
// config, the node's settings and the property registry, is a leaf
// anyone may read. Packages of one tree (broker and broker/acl) may
// import each other.

// importLayer is the rank of a top-level tree: a package may import
// trees of a lower rank (with the exceptions in allowedImport).
var importLayer = map[string]int{
	"cmd": 4, "kafka": 3, "broker": 2,
	"coalescer": 1, "raft": 1, "log": 1, "config": 1,
}

// importsNotYetOneWay are the imports that still run against the order,
// each with where it is to go. The test fails when one of them is gone
// (so the list only shrinks) and for any import not on it.
var importsNotYetOneWay = []string{}

func allowedImport(from, to string) bool {
	ft, tt := topTree(from), topTree(to)
	if ft == tt || tt == "config" || ft == "cmd" {
		return true
	}
	fr, tr := importLayer[ft], importLayer[tt]
	switch {
	case fr == 0 || tr == 0: // integration and the like: not layered
		return true
	case ft == "kafka":
		return tt == "broker"
	case fr == 1 && tr == 1:
		return ft == "raft" && tt == "log" || ft == "coalescer" && tt == "log"
	}
	return tr < fr
}

func topTree(pkg string) string {
	top, _, _ := strings.Cut(pkg, "/")
	return top
}

func TestImportsRunOneWay(t *testing.T) {
	const module = "github.com/weir-broker/weir"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var found []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from, ok := strings.CutPrefix(fields[0], module+"/")
		if !ok {
			continue
		}
		for _, imp := range fields[1:] {
			to, ok := strings.CutPrefix(imp, module+"/")
			if !ok || allowedImport(from, to) {
				continue
			}
			found = append(found, from+" -> "+to)
		}
	}
	if len(found) == 0 && strings.Count(string(out), "\n") < 10 {
		t.Fatalf("go list listed almost nothing:\n%s", out)
	}
	for _, v := range found {
		if !slices.Contains(importsNotYetOneWay, v) {
			t.Errorf("import against the order cmd → kafka → broker → {coalescer, raft, log, config}: %s", v)
		}
	}
	for _, v := range importsNotYetOneWay {
		if !slices.Contains(found, v) {
			t.Errorf("%s no longer happens: remove it from importsNotYetOneWay", v)
		}
	}
}
