package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDefaultFetchMemoryBudget(t *testing.T) {
	for _, tc := range []struct{ available, want int64 }{
		{0, 64 << 20},         // unknown: the floor
		{256 << 20, 64 << 20}, // small machines: the floor
		{8 << 30, 1 << 30},    // an eighth
		{64 << 30, 4 << 30},   // the ceiling
	} {
		if got := DefaultFetchMemoryBudget(tc.available); got != tc.want {
			t.Errorf("DefaultFetchMemoryBudget(%d) = %d, want %d", tc.available, got, tc.want)
		}
	}
	n := Node{FetchMemoryBudgetBytes: -1}
	if got := n.FetchMemoryBudget(); got != 0 {
		t.Errorf("-1 gives %d, want 0 (unbounded)", got)
	}
	n.FetchMemoryBudgetBytes = 5 << 20
	if got := n.FetchMemoryBudget(); got != 5<<20 {
		t.Errorf("5 MiB gives %d", got)
	}
	n.FetchMemoryBudgetBytes = 0
	if got := n.FetchMemoryBudget(); got < minDerivedFetchBudget || got > maxDerivedFetchBudget {
		t.Errorf("derived budget %d outside its bounds", got)
	}
}

func TestRaftHandOffBytes(t *testing.T) {
	for _, tc := range []struct{ available, want int64 }{
		{0, 64 << 20},        // unknown: the floor
		{1 << 30, 64 << 20},  // small machines: the floor
		{4 << 30, 128 << 20}, // a 32nd
		{24 << 30, 256 << 20},
	} {
		if got := RaftHandOffBytes(tc.available); got != tc.want {
			t.Errorf("RaftHandOffBytes(%d) = %d, want %d", tc.available, got, tc.want)
		}
	}
}

func TestReadCgroupLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got := readCgroupLimit(write("a", "1073741824\n")); got != 1<<30 {
		t.Errorf("limit %d, want 1 GiB", got)
	}
	if got := readCgroupLimit(write("b", "max\n")); got != 0 {
		t.Errorf("max reads as %d, want 0", got)
	}
	if got := readCgroupLimit(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("missing file reads as %d", got)
	}
}
