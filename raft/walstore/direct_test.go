package walstore

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	hraft "github.com/hashicorp/raft"
)

// Writes are whole blocks (direct.go): the active segment ends in zeros
// up to a block boundary, which a crash leaves on disk and Open cuts as a
// torn tail, while every rolled segment was truncated to its last record
// before the next one existed, since Open refuses damage anywhere but in
// the last segment. Acknowledged entries survive every crash image.
func TestBlockPaddingAfterTheLastRecord(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 64<<10)
	gs := s.Group("big")
	const entries = 300
	for i := uint64(1); i <= entries; i += 10 {
		storeRange(t, gs, i, i+9, 1)
	}
	names := fsys.files(testDir)
	slices.Sort(names)
	if len(names) < 3 {
		t.Fatalf("segments: %v", names)
	}
	active := fsys.fileData(filepath.Join(testDir, names[len(names)-1]))
	if len(active)%directAlign != 0 {
		t.Errorf("active segment is %d bytes, not whole blocks", len(active))
	}
	sz := s.activeSegment().size
	if sz == int64(len(active)) || !bytes.Equal(active[sz:], make([]byte, int64(len(active))-sz)) {
		t.Errorf("active segment: records end at %d of %d bytes, and the rest must be zeros", sz, len(active))
	}
	s.mu.RLock()
	for _, sg := range s.segs[:len(s.segs)-1] {
		if n := len(fsys.fileData(sg.path)); int64(n) != sg.size {
			t.Errorf("rolled segment %s is %d bytes, its records end at %d", filepath.Base(sg.path), n, sg.size)
		}
	}
	s.mu.RUnlock()
	survivesEveryCrash(t, fsys, 64<<10, "big", 1, entries, 7)
	mustClose(t, s)
	after := fsys.fileData(filepath.Join(testDir, names[len(names)-1]))
	if int64(len(after)) != sz {
		t.Errorf("a clean Close left the active segment at %d bytes, its records end at %d", len(after), sz)
	}
}

// An entry larger than the ring can stage is written through the page
// cache; the ring starts over behind it, and what follows is written and
// read back as usual.
func TestEntryLargerThanTheRing(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 256<<20)
	gs := s.Group("g")
	huge := bytes.Repeat([]byte("0123456789abcdef"), (ringBytes/2)/16+100)
	logs := []*hraft.Log{mkLog("g", 1, 1), {Index: 2, Term: 1, Type: hraft.LogCommand, Data: huge}, mkLog("g", 3, 1)}
	if err := gs.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	storeRange(t, gs, 4, 40, 1)
	check := func(s *Store, when string) {
		t.Helper()
		var l hraft.Log
		for i := uint64(1); i <= 40; i++ {
			want := mkLog("g", i, 1)
			if i == 2 {
				want = logs[1]
			}
			if err := s.Group("g").GetLog(i, &l); err != nil || !sameLog(&l, want) {
				t.Fatalf("%s: entry %d: %v", when, i, err)
			}
		}
	}
	check(s, "written")
	img := openT(t, testDir, fsys.image(keepSynced, rand.New(rand.NewPCG(1, 2))), 256<<20)
	check(img, "after a crash")
	mustClose(t, img)
	mustClose(t, s)
}

// A roll does not empty the ring: right after it the previous segment's
// newest entries are still read from memory; the segment before that one
// is read from its file.
func TestRingKeepsThePreviousSegmentsTail(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 16<<20)
	defer mustClose(t, s)
	g := s.Group("g")
	data := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, 1<<20+int(i)) }
	const entries = 40
	for i := uint64(1); i <= entries; i++ {
		if err := g.StoreLogs([]*hraft.Log{{Index: i, Term: 1, Type: hraft.LogCommand, Data: data(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.RLock()
	segs := slices.Clone(s.segs)
	g0 := s.groups["g"]
	var inLast, inPrev int
	for _, at := range g0.locs {
		switch at.seg {
		case segs[len(segs)-1].seq:
			inLast++
		case segs[len(segs)-2].seq:
			inPrev++
		}
	}
	s.mu.RUnlock()
	if len(segs) < 3 || inLast == 0 || inPrev == 0 {
		t.Fatalf("%d segments, %d entries in the last, %d in the one before: the test needs a roll behind a roll", len(segs), inLast, inPrev)
	}
	var l hraft.Log
	for i := uint64(1); i <= entries; i++ {
		if err := g.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, data(i)) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	st := s.Stats()
	if want := uint64(inLast + inPrev); st.RingReads != want || st.FileReads != entries-want {
		t.Errorf("read back %d entries: %d from the ring, %d from files; want %d and %d", entries, st.RingReads, st.FileReads, want, entries-want)
	}
}
