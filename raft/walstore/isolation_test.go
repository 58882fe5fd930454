package walstore

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// reclaimIdle waits until the writer has nothing left to reclaim.
func reclaimIdle(t testing.TB, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.RLock()
		busy := len(s.segs) > 1 && (s.segs[0].live == 0 || s.shouldRelocate())
		s.mu.RUnlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("reclamation did not settle")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIsolation: whatever one group does to its own log (tail truncation,
// compaction, drop, re-creation) leaves another group's log untouched,
// before and after reopening.
func TestIsolation(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 1<<10)
	a, b := s.Group("a"), s.Group("b")
	next := uint64(1)
	stepA := func() {
		storeRange(t, a, next, next, 1)
		next++
	}
	checkA := func(s *Store, when string) {
		t.Helper()
		st := dumpState(t, s)["a"]
		if st.First != 1 || st.Last != next-1 {
			t.Fatalf("%s: group a is %d..%d, want 1..%d", when, st.First, st.Last, next-1)
		}
	}
	for round := range 6 {
		for i := uint64(1); i <= 30; i++ {
			stepA()
			storeRange(t, b, i, i, 1)
		}
		stepA()
		steps := []struct {
			name string
			do   func() error
		}{
			{"tail truncation", func() error { return b.DeleteRange(21, 30) }},
			{"append after truncation", func() error { return b.StoreLogs(mkLogs("b", 21, 25, 2)) }},
			{"head compaction", func() error { return b.DeleteRange(1, 15) }},
			{"stable", func() error { return b.SetUint64([]byte("CurrentTerm"), 2) }},
			{"drop", func() error { return s.DropGroup("b") }},
		}
		for _, st := range steps {
			if err := st.do(); err != nil {
				t.Fatalf("round %d %s: %v", round, st.name, err)
			}
			stepA()
			checkA(s, fmt.Sprintf("round %d after b's %s", round, st.name))
		}
	}
	reclaimIdle(t, s)
	if st := s.Stats(); st.RelocatedBytes == 0 || st.DiskBytes > 2*st.LiveBytes+(relocateMinSegments+2)*(1<<10) {
		t.Fatalf("segments were not reclaimed: %+v", st)
	}
	if s.HasGroup("b") {
		t.Fatal("dropped group b still listed")
	}
	want := dumpState(t, s)
	mustClose(t, s)
	s = openT(t, testDir, fsys, 1<<10)
	defer mustClose(t, s)
	checkA(s, "after reopen")
	if err := equalStates(want, dumpState(t, s)); err != nil {
		t.Fatal(err)
	}
}

// TestRelocationOfIdleGroup: an idle group's only entries and stable
// state sit in the oldest segment while a busy group writes and compacts
// through many segments. The idle data must be copied forward so the old
// segments go, disk stays within the documented bound, and replay after
// relocation gives exactly the same state.
func TestRelocationOfIdleGroup(t *testing.T) {
	const segBytes = 4 << 10
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, segBytes)
	idle, busy := s.Group("idle"), s.Group("busy")
	storeRange(t, idle, 1, 3, 1)
	if err := idle.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := idle.Set([]byte("LastVoteCand"), []byte("n1")); err != nil {
		t.Fatal(err)
	}
	maxSegs := 0
	for i := uint64(1); i <= 2000; i++ {
		storeRange(t, busy, i, i, 1)
		if i%50 == 0 {
			// A snapshot every 50 entries keeps the last 20.
			if err := busy.DeleteRange(1, i-20); err != nil {
				t.Fatal(err)
			}
		}
		maxSegs = max(maxSegs, s.Stats().Segments)
	}
	reclaimIdle(t, s)
	st := s.Stats()
	t.Logf("%+v, at most %d segments", st, maxSegs)
	if st.BytesWritten < 50*segBytes {
		t.Fatalf("only %d bytes written: not enough segments to test", st.BytesWritten)
	}
	if slices.Contains(fsys.files(testDir), segName(1)) {
		t.Fatal("the first segment, holding the idle group, was never deleted")
	}
	if st.RelocatedBytes == 0 {
		t.Fatal("nothing relocated")
	}
	if bound := 2*st.LiveBytes + (relocateMinSegments+2)*segBytes; st.DiskBytes > bound {
		t.Fatalf("disk %d bytes > bound %d (live %d)", st.DiskBytes, bound, st.LiveBytes)
	}
	if maxSegs > 2*relocateMinSegments+4 {
		t.Fatalf("WAL grew to %d segments", maxSegs)
	}
	want := dumpState(t, s)
	if g := want["idle"]; g.First != 1 || g.Last != 3 || len(g.Stable) != 2 {
		t.Fatalf("idle group after relocation: %+v", g)
	}
	mustClose(t, s)
	s = openT(t, testDir, fsys, segBytes)
	defer mustClose(t, s)
	if err := equalStates(want, dumpState(t, s)); err != nil {
		t.Fatalf("replay after relocation: %v", err)
	}
	if got := s.Stats(); got.LiveBytes != st.LiveBytes || got.DiskBytes != st.DiskBytes {
		t.Fatalf("replay accounts live %d disk %d, the running store had %d %d", got.LiveBytes, got.DiskBytes, st.LiveBytes, st.DiskBytes)
	}
}

// TestReopenRandomized interleaves random operations of several groups
// with reclamation and reopens, checking the state against the model and
// that replay reproduces the running store's state exactly.
func TestReopenRandomized(t *testing.T) {
	for seed := range crashSeeds(t, 8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			segBytes := int64(512 + rng.IntN(4<<10))
			fsys := newFaultFS()
			s := openT(t, testDir, fsys, segBytes)
			var workers []*crashWorker
			for i := range 6 {
				workers = append(workers, &crashWorker{name: fmt.Sprintf("g%d", i)})
			}
			for round := range 6 {
				var wg sync.WaitGroup
				for i, w := range workers {
					wrng := rand.New(rand.NewPCG(uint64(seed*100+round), uint64(i)))
					wg.Go(func() { w.run(s, wrng, 40+i*10) })
				}
				wg.Wait()
				reclaimIdle(t, s)
				got := dumpState(t, s)
				for _, w := range workers {
					if w.pending != nil {
						t.Fatalf("round %d: %s failed %v", round, w.name, w.pending)
					}
					if err := w.check(got[w.name]); err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
				}
				live := s.Stats().LiveBytes
				mustClose(t, s)
				s = openT(t, testDir, fsys, segBytes)
				if err := equalStates(got, dumpState(t, s)); err != nil {
					t.Fatalf("round %d reopen: %v", round, err)
				}
				if l := s.Stats().LiveBytes; l != live {
					t.Fatalf("round %d: live bytes %d after replay, %d before", round, l, live)
				}
			}
			mustClose(t, s)
		})
	}
}

// TestIdleGroupMemory: what an idle group with a few entries and Raft's
// stable keys costs in heap.
func TestIdleGroupMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures heap")
	}
	const groups = 2000
	s := openT(t, t.TempDir(), nil, 0)
	defer mustClose(t, s)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// Warm pools and buffers first.
	storeRange(t, s.Group("warm"), 1, 3, 1)
	before := heap()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for g := w; g < groups; g += 16 {
				gs := s.Group(fmt.Sprintf("topic-%d", g))
				storeRange(t, gs, 1, 5, 1)
				gs.SetUint64([]byte("CurrentTerm"), 1)
				gs.SetUint64([]byte("LastVoteTerm"), 1)
				gs.Set([]byte("LastVoteCand"), []byte("node-1"))
			}
		})
	}
	wg.Wait()
	after := heap()
	per := float64(after-before) / groups
	t.Logf("%.0f bytes of heap per idle group (5 entries, 3 stable keys)", per)
	if per > 2048 {
		t.Fatalf("%.0f bytes per idle group", per)
	}
	runtime.KeepAlive(s)
}
