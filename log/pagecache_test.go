package log

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// droppedRange is one DropCache call a PageCache made.
type droppedRange struct {
	name   string
	off, n int64
}

// recordingPageCache is a PageCache whose drops are recorded instead of
// made, so that what it drops and when is exact.
func recordingPageCache(budget, batch int64) (*PageCache, func() []droppedRange) {
	pc := NewPageCache(budget)
	pc.batch = batch
	var mu sync.Mutex
	var got []droppedRange
	pc.drop = func(f *os.File, off, n int64) {
		mu.Lock()
		got = append(got, droppedRange{f.Name(), off, n})
		mu.Unlock()
	}
	return pc, func() []droppedRange {
		// Drops run on their own goroutine: wait for it to finish.
		deadline := time.Now().Add(10 * time.Second)
		for {
			pc.mu.Lock()
			busy := pc.dropping
			pc.mu.Unlock()
			if !busy || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]droppedRange(nil), got...)
	}
}

// Two logs share one budget: once their appends pass it by the batch,
// the oldest appended ranges of both are dropped, in the order each log
// wrote them, each once, contiguous ranges of a file in one call, and
// what stays counted is the newest budget's worth.
func TestPageCacheDropsOldestBeyondBudget(t *testing.T) {
	const budget, batch = 3 << 20, 4 << 20
	pc, dropped := recordingPageCache(budget, batch)
	cfg := testConfig(nil)
	cfg.PageCache = pc
	a := mustOpen(t, t.TempDir(), cfg)
	defer a.Close()
	b := mustOpen(t, t.TempDir(), cfg)
	defer b.Close()
	batchBytes := simpleBatch(t, 64, 1, 1000)
	for a.Size() < 12<<20 {
		mustAppend(t, a, batchBytes)
		mustAppend(t, b, batchBytes)
	}
	got := dropped()
	if len(got) == 0 {
		t.Fatalf("24 MiB appended under a %d-byte budget, nothing dropped", budget)
	}
	ends := map[string]int64{}
	var total int64
	for i, r := range got {
		if filepath.Base(r.name) != "00000000000000000000.log" {
			t.Fatalf("drop %d: %s, want the active segment", i, r.name)
		}
		if r.off != ends[r.name] || r.n <= 0 {
			t.Fatalf("drop %d: %s [%d, +%d), want it to start at %d (the end of that file's previous drop)", i, r.name, r.off, r.n, ends[r.name])
		}
		ends[r.name] = r.off + r.n
		total += r.n
	}
	merged := false
	for _, r := range got {
		merged = merged || r.n >= 2*writebackChunk
	}
	if !merged {
		t.Fatalf("drops %v: no call covers two of a file's writeback steps", got)
	}
	if len(ends) != 2 {
		t.Fatalf("drops from %d files, want both logs'", len(ends))
	}
	st := pc.Stats()
	held := st.Held
	if st.Dropped != total {
		t.Fatalf("Stats counts %d bytes dropped, the drops made cover %d", st.Dropped, total)
	}
	if held > budget+batch {
		t.Fatalf("held %d bytes after the appends, want at most the budget %d plus the batch %d", held, budget, batch)
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
	pc, dropped := recordingPageCache(1<<20, 0)
	cfg := testConfig(&faultFS{})
	cfg.PageCache = pc
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	batch := simpleBatch(t, 64, 1, 1000)
	for l.Size() < 4<<20 {
		mustAppend(t, l, batch)
	}
	if got, st := dropped(), pc.Stats(); len(got) != 0 || st != (PageCacheStats{}) {
		t.Fatalf("dropped %v, counted %+v: want nothing counted for a File that is not an *os.File", got, st)
	}
}
