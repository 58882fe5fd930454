package walstore

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	hraft "github.com/hashicorp/raft"
)

func TestEmptyGroup(t *testing.T) {
	s := openT(t, testDir, newFaultFS(), 0)
	defer mustClose(t, s)
	gs := s.Group("p-0")
	if !gs.IsMonotonic() {
		t.Fatal("IsMonotonic() = false")
	}
	if i, err := gs.FirstIndex(); i != 0 || err != nil {
		t.Fatalf("FirstIndex = %d, %v", i, err)
	}
	if i, err := gs.LastIndex(); i != 0 || err != nil {
		t.Fatalf("LastIndex = %d, %v", i, err)
	}
	var l hraft.Log
	if err := gs.GetLog(1, &l); !errors.Is(err, hraft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty: %v", err)
	}
	if v, err := gs.Get([]byte("CurrentTerm")); !isNotFound(err) || v != nil {
		t.Fatalf("Get missing = %q, %v; want error \"not found\"", v, err)
	}
	if v, err := gs.GetUint64([]byte("CurrentTerm")); !isNotFound(err) || v != 0 {
		t.Fatalf("GetUint64 missing = %d, %v; want 0, \"not found\"", v, err)
	}
	if s.HasGroup("p-0") || len(s.Groups()) != 0 {
		t.Fatal("a group nothing was stored for is listed")
	}
	// hashicorp/raft's own check must see a fresh group as new.
	has, err := hraft.HasExistingState(gs, gs, hraft.NewInmemSnapshotStore())
	if err != nil || has {
		t.Fatalf("HasExistingState = %v, %v", has, err)
	}
	// Deleting from, or dropping, a group that does not exist is a no-op.
	if err := gs.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.DropGroup("p-0"); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Records != 0 {
		t.Fatalf("no-ops wrote %d records", st.Records)
	}
}

func TestLogContract(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 0)
	gs := s.Group("topic.a-3")
	storeRange(t, gs, 1, 10, 1)
	if err := gs.StoreLog(mkLog(gs.name, 11, 1)); err != nil {
		t.Fatal(err)
	}
	check := func(first, last uint64) {
		t.Helper()
		if i, _ := gs.FirstIndex(); i != first {
			t.Fatalf("FirstIndex = %d, want %d", i, first)
		}
		if i, _ := gs.LastIndex(); i != last {
			t.Fatalf("LastIndex = %d, want %d", i, last)
		}
		var l hraft.Log
		for _, i := range []uint64{first - 1, last + 1} {
			if err := gs.GetLog(i, &l); !errors.Is(err, hraft.ErrLogNotFound) {
				t.Fatalf("GetLog(%d) outside %d..%d: %v", i, first, last, err)
			}
		}
	}
	check(1, 11)
	for i := uint64(1); i <= 11; i++ {
		var l hraft.Log
		if err := gs.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if want := mkLog(gs.name, i, 1); !sameLog(&l, want) {
			t.Fatalf("entry %d round trip: got %+v want %+v", i, l, want)
		}
	}

	// Gaps, overlaps and non-consecutive batches are refused and change nothing.
	for _, bad := range [][]*hraft.Log{
		mkLogs(gs.name, 13, 14, 1),
		mkLogs(gs.name, 11, 12, 1),
		{mkLog(gs.name, 12, 1), mkLog(gs.name, 14, 1)},
		{mkLog(gs.name, 0, 1)},
	} {
		if err := gs.StoreLogs(bad); !errors.Is(err, ErrNotContiguous) {
			t.Fatalf("StoreLogs(%d..) = %v, want ErrNotContiguous", bad[0].Index, err)
		}
	}
	check(1, 11)

	// Head compaction after a snapshot.
	if err := gs.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	check(5, 11)
	// Tail truncation on a conflict, then new entries in a later term.
	if err := gs.DeleteRange(9, 11); err != nil {
		t.Fatal(err)
	}
	check(5, 8)
	storeRange(t, gs, 9, 12, 2)
	check(5, 12)
	// A hole in the middle is refused.
	if err := gs.DeleteRange(7, 8); !errors.Is(err, ErrNotContiguous) {
		t.Fatalf("middle DeleteRange = %v", err)
	}
	// Ranges reaching past either end are clipped.
	if err := gs.DeleteRange(0, 5); err != nil {
		t.Fatal(err)
	}
	check(6, 12)
	want := dumpState(t, s)

	mustClose(t, s)
	s = openT(t, testDir, fsys, 0)
	if err := equalStates(want, dumpState(t, s)); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	gs = s.Group(gs.name)
	// Everything (what Raft does after installing a snapshot on a
	// MonotonicLogStore), then any first index is accepted.
	if err := gs.DeleteRange(6, 12); err != nil {
		t.Fatal(err)
	}
	if i, _ := gs.LastIndex(); i != 0 {
		t.Fatalf("LastIndex after deleting all = %d", i)
	}
	storeRange(t, gs, 1000, 1002, 5)
	check(1000, 1002)
	mustClose(t, s)
	s = openT(t, testDir, fsys, 0)
	defer mustClose(t, s)
	gs = s.Group(gs.name)
	check(1000, 1002)
}

func TestStableContract(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 0)
	gs := s.Group("g")
	if err := gs.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := gs.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	if err := gs.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if err := gs.SetUint64([]byte("CurrentTerm"), 8); err != nil {
		t.Fatal(err)
	}
	if !s.HasGroup("g") {
		t.Fatal("HasGroup after Set = false")
	}
	has, err := hraft.HasExistingState(gs, gs, hraft.NewInmemSnapshotStore())
	if err != nil || !has {
		t.Fatalf("HasExistingState = %v, %v", has, err)
	}
	check := func() {
		t.Helper()
		if v, err := gs.GetUint64([]byte("CurrentTerm")); v != 8 || err != nil {
			t.Fatalf("CurrentTerm = %d, %v", v, err)
		}
		if v, err := gs.Get([]byte("LastVoteCand")); string(v) != "node-2" || err != nil {
			t.Fatalf("LastVoteCand = %q, %v", v, err)
		}
		if v, err := gs.Get([]byte("empty")); len(v) != 0 || err != nil {
			t.Fatalf("empty = %q, %v", v, err)
		}
		if _, err := gs.GetUint64([]byte("LastVoteCand")); err == nil {
			t.Fatal("GetUint64 of a 6-byte value succeeded")
		}
		if _, err := gs.Get([]byte("LastVoteTerm")); !isNotFound(err) {
			t.Fatalf("missing key: %v", err)
		}
	}
	check()
	mustClose(t, s)
	s = openT(t, testDir, fsys, 0)
	defer mustClose(t, s)
	gs = s.Group("g")
	check()
}

func TestClosedAndInvalid(t *testing.T) {
	s := openT(t, testDir, newFaultFS(), 0)
	gs := s.Group("a")
	storeRange(t, gs, 1, 2, 1)
	for _, name := range []string{"", "a/b", "x y", string(make([]byte, 256))} {
		bad := s.Group(name)
		if err := bad.StoreLogs(mkLogs("a", 1, 1, 1)); !errors.Is(err, ErrInvalidGroup) {
			t.Fatalf("StoreLogs on %q: %v", name, err)
		}
		if _, err := bad.LastIndex(); !errors.Is(err, ErrInvalidGroup) {
			t.Fatalf("LastIndex on %q: %v", name, err)
		}
		if err := s.DropGroup(name); !errors.Is(err, ErrInvalidGroup) {
			t.Fatalf("DropGroup(%q): %v", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	var l hraft.Log
	if err := gs.StoreLogs(mkLogs("a", 3, 3, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("StoreLogs after Close: %v", err)
	}
	if err := gs.GetLog(1, &l); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetLog after Close: %v", err)
	}
	if _, err := gs.LastIndex(); !errors.Is(err, ErrClosed) {
		t.Fatalf("LastIndex after Close: %v", err)
	}
	if err := gs.SetUint64([]byte("k"), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetUint64 after Close: %v", err)
	}
	if err := s.DropGroup("a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("DropGroup after Close: %v", err)
	}
}

func TestDropGroup(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 0)
	a, b := s.Group("a"), s.Group("b")
	storeRange(t, a, 1, 5, 1)
	storeRange(t, b, 1, 5, 1)
	if err := a.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.DropGroup("a"); err != nil {
		t.Fatal(err)
	}
	if s.HasGroup("a") || !s.HasGroup("b") {
		t.Fatalf("after drop: HasGroup(a)=%v HasGroup(b)=%v", s.HasGroup("a"), s.HasGroup("b"))
	}
	if got := s.Groups(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("Groups = %v", got)
	}
	if i, _ := a.LastIndex(); i != 0 {
		t.Fatalf("dropped group LastIndex = %d", i)
	}
	if _, err := a.GetUint64([]byte("CurrentTerm")); !isNotFound(err) {
		t.Fatalf("dropped group stable key: %v", err)
	}
	mustClose(t, s)
	s = openT(t, testDir, fsys, 0)
	if s.HasGroup("a") {
		t.Fatal("dropped group back after reopen")
	}
	// Re-creation starts empty and accepts any first index.
	a = s.Group("a")
	storeRange(t, a, 50, 51, 9)
	want := dumpState(t, s)
	mustClose(t, s)
	s = openT(t, testDir, fsys, 0)
	defer mustClose(t, s)
	if err := equalStates(want, dumpState(t, s)); err != nil {
		t.Fatal(err)
	}
	if i, _ := s.Group("a").FirstIndex(); i != 50 {
		t.Fatalf("re-created group FirstIndex = %d", i)
	}
}

// TestTailCache: the last entry, when small, is served from memory, and a
// tail truncation or a new last entry never serves a stale one.
func TestTailCache(t *testing.T) {
	s := openT(t, testDir, newFaultFS(), 0)
	defer mustClose(t, s)
	gs := s.Group("tail")
	store := func(i, term uint64, data string) {
		t.Helper()
		if err := gs.StoreLogs([]*hraft.Log{{Index: i, Term: term, Type: hraft.LogCommand, Data: []byte(data)}}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(i uint64) *hraft.Log {
		t.Helper()
		var l hraft.Log
		if err := gs.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		return &l
	}
	store(1, 1, "a")
	store(2, 1, "b")
	l := get(2)
	if string(l.Data) != "b" || l.Term != 1 {
		t.Fatalf("last entry: %+v", l)
	}
	l.Data[0] = 'x' // a caller's change must not reach the cache
	if got := get(2); string(got.Data) != "b" {
		t.Fatalf("cached entry changed by a caller: %q", got.Data)
	}
	if err := gs.DeleteRange(2, 2); err != nil {
		t.Fatal(err)
	}
	var gone hraft.Log
	if err := gs.GetLog(2, &gone); err != hraft.ErrLogNotFound {
		t.Fatalf("truncated entry: %v", err)
	}
	if got := get(1); string(got.Data) != "a" {
		t.Fatalf("entry 1 after truncating 2: %q", got.Data)
	}
	store(2, 2, "c")
	if got := get(2); string(got.Data) != "c" || got.Term != 2 {
		t.Fatalf("new last entry: %+v", got)
	}
	big := strings.Repeat("z", 4*tailCacheMax)
	store(3, 2, big)
	if got := get(3); string(got.Data) != big {
		t.Fatal("a large last entry read back wrong")
	}
}

// Entries of inlineDataMin bytes or more are written from the caller's
// slice, between records StoreLogs copies: mixed in one StoreLogs, at the
// boundary sizes, they read back whole, before and after a reopen, and
// the caller may reuse its slices once StoreLogs returned.
func TestLargeEntriesFromCallerData(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 64<<10)
	gs := s.Group("big")
	sizes := []int{10, inlineDataMin - 1, inlineDataMin, 3 * inlineDataMin, 0, 100, 2*inlineDataMin + 7, inlineDataMin}
	want := make([]*hraft.Log, len(sizes))
	for i, n := range sizes {
		data := bytes.Repeat([]byte{byte('a' + i)}, n)
		want[i] = &hraft.Log{Index: uint64(i + 1), Term: 2, Type: hraft.LogCommand, Data: data, Extensions: []byte{byte(i)}}
	}
	in := make([]*hraft.Log, len(want))
	for i, l := range want {
		c := *l
		c.Data = bytes.Clone(l.Data)
		in[i] = &c
	}
	if err := gs.StoreLogs(in); err != nil {
		t.Fatal(err)
	}
	for _, l := range in {
		for j := range l.Data {
			l.Data[j] = 0 // the caller's to reuse now
		}
	}
	check := func(s *Store, when string) {
		t.Helper()
		gs := s.Group("big")
		for _, w := range want {
			var l hraft.Log
			if err := gs.GetLog(w.Index, &l); err != nil {
				t.Fatalf("%s: GetLog(%d): %v", when, w.Index, err)
			}
			if !sameLog(&l, w) {
				t.Fatalf("%s: entry %d of %d bytes differs", when, w.Index, len(w.Data))
			}
		}
	}
	check(s, "stored")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, testDir, fsys, 64<<10)
	defer s.Close()
	check(s, "reopened")
}
