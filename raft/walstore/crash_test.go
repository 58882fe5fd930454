package walstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// crashSeeds is how many randomized crash runs to do; WALSTORE_CRASH_SEEDS
// raises it for a soak.
func crashSeeds(t *testing.T, def int) int {
	if v := os.Getenv("WALSTORE_CRASH_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("WALSTORE_CRASH_SEEDS: %v", err)
		}
		return n
	}
	if testing.Short() {
		return def / 4
	}
	return def
}

// op is one mutation a crash test worker makes; apply gives the states
// the group may be in if the op's outcome is unknown (it failed or was in
// flight at the crash): the old state is always one of them.
type op struct {
	kind     byte
	lo, hi   uint64 // entries lo..hi / delete range
	term     uint64
	key, val string
}

func (o op) String() string {
	return fmt.Sprintf("op{kind %d %d..%d term %d %s}", o.kind, o.lo, o.hi, o.term, o.key)
}

func cloneState(st groupState) groupState {
	st.Terms = slices.Clone(st.Terms)
	st.Stable = maps.Clone(st.Stable)
	if st.Stable == nil {
		st.Stable = map[string]string{}
	}
	return st
}

// applyOp returns the states after o, one per prefix of a StoreLogs that
// a torn write may leave (the full one last).
func applyOp(st groupState, o op) []groupState {
	switch o.kind {
	case kindEntry:
		var out []groupState
		cur := cloneState(st)
		for i := o.lo; i <= o.hi; i++ {
			if cur.Last == 0 {
				cur.First = i
			}
			cur.Last = i
			cur.Terms = append(cur.Terms, o.term)
			out = append(out, cloneState(cur))
		}
		return out
	case kindDelete:
		cur := cloneState(st)
		if cur.Last == 0 || o.hi < cur.First || o.lo > cur.Last {
			return []groupState{cur}
		}
		lo, hi := max(o.lo, cur.First), min(o.hi, cur.Last)
		switch {
		case lo == cur.First && hi == cur.Last:
			cur.First, cur.Last, cur.Terms = 0, 0, nil
		case lo == cur.First:
			cur.Terms = cur.Terms[hi-cur.First+1:]
			cur.First = hi + 1
		default:
			cur.Terms = cur.Terms[:lo-cur.First]
			cur.Last = lo - 1
		}
		return []groupState{cur}
	case kindStable:
		cur := cloneState(st)
		cur.Stable[o.key] = o.val
		return []groupState{cur}
	default: // kindDrop
		return []groupState{{Stable: map[string]string{}}}
	}
}

func sameState(a, b groupState) bool {
	return a.First == b.First && a.Last == b.Last && slices.Equal(a.Terms, b.Terms) && maps.Equal(a.Stable, b.Stable)
}

func u64(v uint64) string { return string(binary.BigEndian.AppendUint64(nil, v)) }

// crashWorker drives one group with random Raft-like operations until an
// operation fails, keeping the acknowledged state and the op whose fate is
// unknown.
type crashWorker struct {
	name    string
	acked   groupState
	pending *op
	term    uint64
}

// run makes up to ops operations, continuing from earlier runs.
func (w *crashWorker) run(s *Store, rng *rand.Rand, ops int) {
	gs := s.Group(w.name)
	if w.term == 0 {
		w.term = 1
	}
	term := w.term
	defer func() { w.term = term }()
	if w.acked.Stable == nil {
		w.acked.Stable = map[string]string{}
	}
	for range ops {
		st := w.acked
		var o op
		switch r := rng.IntN(100); {
		case st.Last == 0 || r < 55:
			lo := st.Last + 1
			if st.Last == 0 {
				lo = 1 + uint64(rng.IntN(3))*100
			}
			o = op{kind: kindEntry, lo: lo, hi: lo + uint64(rng.IntN(4)), term: term}
		case r < 68 && st.Last > st.First:
			o = op{kind: kindDelete, lo: st.First - uint64(rng.IntN(2)), hi: st.First + uint64(rng.IntN(int(st.Last-st.First)))}
		case r < 78:
			o = op{kind: kindDelete, lo: st.Last - uint64(rng.IntN(int(st.Last-st.First+1))), hi: st.Last + uint64(rng.IntN(2))}
			term++
		case r < 97:
			term++
			o = op{kind: kindStable, key: "CurrentTerm", val: u64(term)}
			if rng.IntN(2) == 0 {
				o = op{kind: kindStable, key: "LastVoteCand", val: fmt.Sprintf("node-%d", term)}
			}
		default:
			o = op{kind: kindDrop}
		}
		var err error
		switch o.kind {
		case kindEntry:
			err = gs.StoreLogs(mkLogs(w.name, o.lo, o.hi, o.term))
		case kindDelete:
			err = gs.DeleteRange(o.lo, o.hi)
		case kindStable:
			err = gs.Set([]byte(o.key), []byte(o.val))
		case kindDrop:
			err = s.DropGroup(w.name)
		}
		if err != nil {
			w.pending = &o
			return
		}
		after := applyOp(w.acked, o)
		w.acked = after[len(after)-1]
	}
}

// check verifies got is the acknowledged state or, if an op was in doubt,
// a state that op can leave.
func (w *crashWorker) check(got groupState) error {
	if sameState(got, w.acked) {
		return nil
	}
	if w.pending != nil {
		for _, st := range applyOp(w.acked, *w.pending) {
			if sameState(got, st) {
				return nil
			}
		}
	}
	return fmt.Errorf("group %s: recovered %+v, acknowledged %+v, in doubt %v", w.name, got, w.acked, w.pending)
}

// TestCrashRandomized crashes the machine at a random I/O step while
// several groups append, compact, truncate, set terms and drop, with small
// segments so that rolls, segment deletion and relocation happen too.
// Whatever the crash keeps of unsynced bytes (nothing, everything, a torn
// part, garbage after it), Open must find every acknowledged operation and
// nothing that was never issued.
func TestCrashRandomized(t *testing.T) {
	for seed := range crashSeeds(t, 40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			fsys := newFaultFS()
			segBytes := int64(1<<10 + rng.IntN(4<<10))
			s := openT(t, testDir, fsys, segBytes)
			// An idle group whose only data sits in the oldest segment.
			idle := &crashWorker{name: "idle", acked: groupState{Stable: map[string]string{}}}
			storeRange(t, s.Group("idle"), 1, 3, 1)
			if err := s.Group("idle").SetUint64([]byte("CurrentTerm"), 1); err != nil {
				t.Fatal(err)
			}
			idle.acked = groupState{First: 1, Last: 3, Terms: []uint64{1, 1, 1}, Stable: map[string]string{"CurrentTerm": u64(1)}}

			fsys.crashFrom(fsys.stepCount() + 50 + rng.IntN(600))
			workers := []*crashWorker{idle}
			var wg sync.WaitGroup
			for i := range 4 {
				name := fmt.Sprintf("g%d", i)
				if i%2 == 1 {
					name = fmt.Sprintf("big%d", i) // large entries too (entryData)
				}
				w := &crashWorker{name: name}
				workers = append(workers, w)
				wrng := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
				wg.Go(func() { w.run(s, wrng, 200) })
			}
			wg.Wait()
			st, inDoubt := s.Stats(), 0
			for _, w := range workers {
				if w.pending != nil {
					inDoubt++
				}
			}
			t.Logf("segments %d, relocated %d bytes, %d records; %d groups with an op in doubt", st.Segments, st.RelocatedBytes, st.Records, inDoubt)
			mustClose(t, s)

			for _, mode := range []crashMode{keepSynced, keepAll, keepTorn, keepGarbage} {
				img := fsys.image(mode, rng)
				s2, err := Open(testDir, Options{FS: img, SegmentBytes: segBytes})
				if err != nil {
					t.Fatalf("%v: Open after crash: %v", mode, err)
				}
				got := dumpState(t, s2)
				for _, w := range workers {
					if err := w.check(got[w.name]); err != nil {
						t.Errorf("%v: %v", mode, err)
					}
					delete(got, w.name)
				}
				for name := range got {
					t.Errorf("%v: unexpected group %s", mode, name)
				}
				// The recovered store keeps working and recovers the same.
				storeRange(t, s2.Group("after"), 1, 2, 1)
				want := dumpState(t, s2)
				mustClose(t, s2)
				s3 := openT(t, testDir, img, segBytes)
				if err := equalStates(want, dumpState(t, s3)); err != nil {
					t.Errorf("%v: second reopen: %v", mode, err)
				}
				mustClose(t, s3)
			}
		})
	}
}

// TestSyncFailureFailStop: a failed fsync fails every caller waiting on
// it or queued behind it (including a batch written while it ran), and
// the store refuses all later writes.
func TestSyncFailureFailStop(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 0)
	gs := s.Group("g")
	storeRange(t, gs, 1, 5, 1)

	// The writer is held in its next write, so everything submitted
	// meanwhile queues behind that batch.
	entered, release := holdFirst(fsys.setWriteHook)
	const queued = 8
	errs := make(chan error, queued+1)
	go func() { errs <- gs.StoreLogs(mkLogs("g", 6, 6, 1)) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("writer never reached its write")
	}
	for i := range queued {
		go func() { errs <- s.Group(fmt.Sprintf("q%d", i)).SetUint64([]byte("CurrentTerm"), 1) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.qmu.Lock()
		n := len(s.queue)
		s.qmu.Unlock()
		if n == queued {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests queued", n)
		}
		time.Sleep(time.Millisecond)
	}
	fsys.failNextSyncs(1)
	close(release)
	for range queued + 1 {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrFailed) {
				t.Fatalf("caller got %v, want ErrFailed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("caller not woken after failed fsync")
		}
	}
	// Fail-stop: even though Sync would work now, nothing more is written.
	steps := fsys.stepCount()
	if err := gs.StoreLogs(mkLogs("g", 6, 6, 1)); !errors.Is(err, ErrFailed) || !errors.Is(err, errInjected) {
		t.Fatalf("StoreLogs after failed fsync = %v", err)
	}
	if err := gs.SetUint64([]byte("CurrentTerm"), 2); !errors.Is(err, ErrFailed) {
		t.Fatalf("Set after failed fsync = %v", err)
	}
	if fsys.stepCount() != steps {
		t.Fatal("the failed store kept writing")
	}
	// What was acknowledged is still served; the failed entry never was.
	if last, _ := gs.LastIndex(); last != 5 {
		t.Fatalf("LastIndex = %d", last)
	}
	var l hraft.Log
	if err := gs.GetLog(5, &l); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)

	for _, mode := range []crashMode{keepSynced, keepAll} {
		s := openT(t, testDir, fsys.image(mode, rand.New(rand.NewPCG(1, 2))), 0)
		last, _ := s.Group("g").LastIndex()
		if last < 5 {
			t.Fatalf("%v: acknowledged entries lost: LastIndex %d", mode, last)
		}
		storeRange(t, s.Group("g"), last+1, last+1, 2)
		mustClose(t, s)
	}
}

// TestShortWriteFailStop: a failed write leaves half a batch in the file;
// the store stops, and Open cuts the torn bytes and carries on.
func TestShortWriteFailStop(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 0)
	gs := s.Group("g")
	storeRange(t, gs, 1, 5, 1)
	fsys.failNextWrites(1)
	if err := gs.StoreLogs(mkLogs("g", 6, 9, 1)); !errors.Is(err, ErrFailed) {
		t.Fatalf("StoreLogs with failed write = %v", err)
	}
	if err := gs.StoreLogs(mkLogs("g", 6, 9, 1)); !errors.Is(err, ErrFailed) {
		t.Fatalf("StoreLogs after failed write = %v", err)
	}
	mustClose(t, s)
	s = openT(t, testDir, fsys.image(keepAll, rand.New(rand.NewPCG(1, 2))), 0)
	defer mustClose(t, s)
	st := dumpState(t, s)["g"]
	if st.First != 1 || st.Last < 5 || st.Last > 9 {
		t.Fatalf("after torn write: %+v", st)
	}
	storeRange(t, s.Group("g"), st.Last+1, st.Last+3, 2)
}

// TestCorruptionInOlderSegment: damage anywhere but the last segment's
// tail is acknowledged data lost, and Open must say where instead of
// truncating.
func TestCorruptionInOlderSegment(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 2<<10)
	gs := s.Group("g")
	for i := uint64(1); i <= 120; i++ {
		storeRange(t, gs, i, i, 1)
	}
	if n := s.Stats().Segments; n < 3 {
		t.Fatalf("only %d segments", n)
	}
	mustClose(t, s)
	name := testDir + "/" + fsys.files(testDir)[0]
	b := fsys.fileData(name)
	b[segHeaderLen+20] ^= 0xff
	fsys.setFileData(name, b)
	_, err := Open(testDir, Options{FS: fsys, SegmentBytes: 2 << 10})
	want := fmt.Sprintf("%s: corrupt record at offset %d", name, segHeaderLen)
	if err == nil || !containsStr(err.Error(), want) {
		t.Fatalf("Open = %v, want an error containing %q", err, want)
	}
}

func containsStr(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || containsStr(s[1:], sub)))
}
