package log

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// droppedRange is one DropCache call a PageCache made.
type droppedRange struct {
	name   string
	off, n int64
}

// recordingPageCache is a PageCache whose drops are recorded instead of
// made, so that what it drops and when is exact.
func recordingPageCache(budget int64) (*PageCache, func() []droppedRange) {
	pc := NewPageCache(budget)
	var mu sync.Mutex
	var got []droppedRange
	pc.drop = func(f *os.File, off, n int64) {
		mu.Lock()
		got = append(got, droppedRange{filepath.Base(f.Name()), off, n})
		mu.Unlock()
	}
	return pc, func() []droppedRange {
		mu.Lock()
		defer mu.Unlock()
		return append([]droppedRange(nil), got...)
	}
}

// Two logs share one budget: whatever either appends beyond it drops the
// oldest appended ranges of both, in the order they were written, each
// once, and what stays counted is the newest budget's worth.
func TestPageCacheDropsOldestBeyondBudget(t *testing.T) {
	const budget = 3 << 20
	pc, dropped := recordingPageCache(budget)
	cfg := testConfig(nil)
	cfg.PageCache = pc
	a := mustOpen(t, t.TempDir(), cfg)
	defer a.Close()
	b := mustOpen(t, t.TempDir(), cfg)
	defer b.Close()
	batch := simpleBatch(t, 64, 1, 1000)
	for a.Size() < 8<<20 {
		mustAppend(t, a, batch)
		mustAppend(t, b, batch)
	}
	got := dropped()
	if len(got) == 0 {
		t.Fatalf("16 MiB appended under a %d-byte budget, nothing dropped", budget)
	}
	// Per log, the dropped ranges are the file's head, contiguous and in
	// order; between the logs they alternate as the appends did.
	ends := [2]int64{}
	var total int64
	for i, r := range got {
		k := i % 2
		if r.name != "00000000000000000000.log" {
			t.Fatalf("drop %d: %s, want the active segment", i, r.name)
		}
		if r.off != ends[k] || r.n <= 0 {
			t.Fatalf("drop %d: [%d, +%d), want it to start at %d (the end of that log's previous drop)", i, r.off, r.n, ends[k])
		}
		ends[k] = r.off + r.n
		total += r.n
	}
	held := pc.Held()
	if held > budget || held < budget-2*writebackChunk {
		t.Fatalf("held %d bytes after the appends, want just under the budget %d", held, budget)
	}
	// Everything whose writeback was started is either dropped or held.
	page := int64(os.Getpagesize())
	started := (a.Size() &^ (page - 1)) + (b.Size() &^ (page - 1))
	if total+held > started || total+held < started-2*writebackChunk {
		t.Fatalf("dropped %d + held %d bytes, want the %d bytes started less at most one step per log", total, held, started)
	}
}

// Without a PageCache the appends drop nothing (the kernel's page cache,
// as Kafka leaves it); with one, a log whose File is not an *os.File (a
// test's fault-injecting FS) is not counted.
func TestPageCacheOnlyCountsOSFiles(t *testing.T) {
	pc, dropped := recordingPageCache(1 << 20)
	cfg := testConfig(&faultFS{})
	cfg.PageCache = pc
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	batch := simpleBatch(t, 64, 1, 1000)
	for l.Size() < 4<<20 {
		mustAppend(t, l, batch)
	}
	if got := dropped(); len(got) != 0 || pc.Held() != 0 {
		t.Fatalf("dropped %v, held %d: want nothing counted for a File that is not an *os.File", got, pc.Held())
	}
}
