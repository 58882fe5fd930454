package walstore

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// A group compacting its log as Raft does (keep the newest entries,
// delete the rest) empties the oldest segments; they become spares and
// then new segments, so the active segment is a file whose earlier life's
// records lie past its own. Every crash image opens at exactly the
// acknowledged log, the directory never holds more than the WAL's
// segments and maxSpares spares, and a reopened store takes its spares
// back.
func TestSpareSegmentsAreReusedNotReplayed(t *testing.T) {
	const segBytes = 64 << 10
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, segBytes)
	gs := s.Group("a")
	first, last := uint64(1), uint64(0)
	reused, sawSpare := false, false
	for round := 0; round < 400 && !reused; round++ {
		storeRange(t, gs, last+1, last+20, 1)
		last += 20
		if err := gs.DeleteRange(first, last-5); err != nil {
			t.Fatalf("DeleteRange: %v", err)
		}
		first = last - 4
		waitFor(t, "the writer to reclaim", func() bool { return s.Stats().Segments <= relocateMinSegments+2 })
		st := s.Stats()
		sawSpare = sawSpare || st.Spares > 0
		if files := len(fsys.files(testDir)); files > st.Segments+maxSpares {
			t.Fatalf("round %d: %d files for %d segments and %d spares", round, files, st.Segments, st.Spares)
		}
		s.mu.RLock()
		active := s.activeSegment()
		stale := int64(len(fsys.fileData(active.path))) - (active.size+directAlign-1)&^(directAlign-1)
		s.mu.RUnlock()
		// Well past the padded end: another life's records.
		reused = stale > 4*directAlign
	}
	if !sawSpare || !reused {
		t.Fatalf("spares seen: %v, active segment reused with an earlier life behind its records: %v", sawSpare, reused)
	}
	survivesEveryCrash(t, fsys, segBytes, "a", first, last, 11)
	mustClose(t, s)

	// Reopened, the store takes the spares it left back.
	s = openT(t, testDir, fsys, segBytes)
	defer mustClose(t, s)
	spares := 0
	for _, name := range fsys.files(testDir) {
		if strings.HasSuffix(name, spareSuffix) {
			spares++
		}
	}
	if st := s.Stats(); st.Spares != spares || spares == 0 {
		t.Errorf("reopened with %d spare files in %s, Stats says %d", spares, filepath.Base(testDir), st.Spares)
	}
}

// The earlier life's records are whole and checksummed, and here they
// are the same group's next entries: a torn write can leave them right
// behind the last record that reached the disk (the zeros that pad a
// write's last block never written). Replayed, they would be entries
// never acknowledged in this life; the salt makes replay stop before them.
func TestEarlierLifeBehindTheLastRecordIsNotReplayed(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 1<<20)
	storeRange(t, s.Group("a"), 1, 40, 1)
	s.mu.RLock()
	cut := s.groups["a"].locs[20].off // where entry 21 starts
	s.mu.RUnlock()
	mustClose(t, s)

	// Segment 1 becomes segment 2's file: its first 20 entries rewritten
	// in segment 2's life (the same bytes, salted for it), entries 21..40
	// left from segment 1's.
	old := fsys.fileData(filepath.Join(testDir, segName(1)))
	file := append(encodeSegHeader(2), old[segHeaderLen:]...)
	saltFrames([][]byte{file[segHeaderLen:cut]}, segSalt(1)^segSalt(2))
	if err := fsys.Rename(filepath.Join(testDir, segName(1)), filepath.Join(testDir, segName(2))); err != nil {
		t.Fatal(err)
	}
	fsys.setFileData(filepath.Join(testDir, segName(2)), file)

	s = openT(t, testDir, fsys, 1<<20)
	defer mustClose(t, s)
	g := s.Group("a")
	if l, _ := g.LastIndex(); l != 20 {
		t.Fatalf("last index %d, want 20: the earlier life's entries were replayed", l)
	}
	var l hraft.Log
	for i := uint64(1); i <= 20; i++ {
		if err := g.GetLog(i, &l); err != nil || !sameLog(&l, mkLog("a", i, 1)) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	storeRange(t, g, 21, 25, 2)
}

// With PrepareSpares a store writes a spare of zeros once its active
// segment is half full, not before (an idle store writes none), the roll
// makes its segment from it, and the next one is prepared behind it; what
// the store acknowledged survives every crash image. Written in large
// batches, a segment gets no zeros.
func TestPreparedSpareBecomesTheNextSegment(t *testing.T) {
	const segBytes = 64 << 10
	fsys := newFaultFS()
	s, err := Open(testDir, Options{FS: fsys, SegmentBytes: segBytes, PrepareSpares: true})
	if err != nil {
		t.Fatal(err)
	}
	gs := s.Group("a")
	var last uint64
	for s.activeSize() < segBytes/2 {
		if st := s.Stats(); st.Spares != 0 || st.PreparedSpares != 0 {
			t.Fatalf("a spare prepared while the segment holds %d bytes", s.activeSize())
		}
		storeRange(t, gs, last+1, last+20, 1)
		last += 20
	}
	waitFor(t, "a prepared spare", func() bool { return s.Stats().Spares == 1 })
	var name string
	for _, n := range fsys.files(testDir) {
		if strings.HasSuffix(n, spareSuffix) {
			name = n
		}
	}
	if data := fsys.fileData(filepath.Join(testDir, name)); len(data) != segBytes || !bytes.Equal(data, make([]byte, segBytes)) {
		t.Fatalf("spare %q: %d bytes, want %d zeros", name, len(data), segBytes)
	}
	for s.Stats().ReusedSpares < 3 && last < 10000 {
		storeRange(t, gs, last+1, last+20, 1)
		last += 20
		// Each roll finds the spare prepared after the one before.
		if s.activeSize() >= segBytes/2 {
			waitFor(t, "the next spare", func() bool { return s.Stats().Spares == 1 })
		}
	}
	st := s.Stats()
	if st.ReusedSpares < 3 || st.PreparedSpares != st.ReusedSpares {
		t.Fatalf("%d entries: %d spares prepared, %d reused", last, st.PreparedSpares, st.ReusedSpares)
	}
	survivesEveryCrash(t, fsys, segBytes, "a", 1, last, 13)
	mustClose(t, s)

	fsys = newFaultFS()
	s, err = Open(testDir, Options{FS: fsys, SegmentBytes: 4 << 20, PrepareSpares: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, s)
	big := make([]byte, 2*zeroFillPaysBelow)
	for i := uint64(1); i <= 6; i++ {
		if err := s.Group("b").StoreLogs([]*hraft.Log{{Index: i, Term: 1, Type: hraft.LogCommand, Data: big}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // what a preparer would need here
	if st := s.Stats(); st.Segments < 2 || st.PreparedSpares != 0 {
		t.Errorf("%d segments of %d MiB writes: %d spares prepared, want 0", st.Segments, 2*zeroFillPaysBelow>>20, st.PreparedSpares)
	}
}

// A spare's zero fill waits zeroFillPause times each chunk's write after
// it, so that the WAL's own writes are not queued behind the whole fill,
// and a store that closes meanwhile stops it at once.
func TestZeroFillIsPaced(t *testing.T) {
	const segBytes = 4 * zeroChunk
	const slowWrite = 5 * time.Millisecond
	fsys := newFaultFS()
	fsys.setWriteHook(func(name string) {
		if strings.HasSuffix(name, spareSuffix) {
			time.Sleep(slowWrite)
		}
	})
	s, err := Open(testDir, Options{FS: fsys, SegmentBytes: segBytes, PrepareSpares: true})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var pauses []time.Duration
	s.fillPause = func(d time.Duration) bool {
		mu.Lock()
		pauses = append(pauses, d)
		mu.Unlock()
		return true
	}
	gs := s.Group("a")
	var last uint64
	for s.activeSize() < segBytes/2 {
		storeRange(t, gs, last+1, last+100, 1)
		last += 100
	}
	waitFor(t, "a prepared spare", func() bool { return s.Stats().PreparedSpares == 1 })
	mu.Lock()
	got := slices.Clone(pauses)
	mu.Unlock()
	if len(got) != segBytes/zeroChunk {
		t.Fatalf("%d pauses for a spare of %d chunks", len(got), segBytes/zeroChunk)
	}
	for i, d := range got {
		if d < zeroFillPause*slowWrite {
			t.Errorf("pause %d after a write of at least %v: %v, want at least %v", i, slowWrite, d, zeroFillPause*slowWrite)
		}
	}
	mustClose(t, s)

	s, err = Open(testDir, Options{FS: newFaultFS(), SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan bool)
	go func() { stopped <- s.pauseFill(time.Hour) }()
	mustClose(t, s)
	select {
	case ok := <-stopped:
		if ok {
			t.Fatal("pauseFill waited out its hour with the store closed")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("pauseFill still waiting 20 s after Close")
	}
}

// A segment written before files were recycled (version 1, records'
// CRCs unsalted) still opens and reads, and the store goes on appending
// to it with the same unsalted CRCs.
func TestVersion1SegmentStillReads(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 1<<20)
	storeRange(t, s.Group("old"), 1, 30, 1)
	mustClose(t, s)
	path := filepath.Join(testDir, segName(1))
	data := fsys.fileData(path)
	hdr := encodeSegHeader(1)
	hdr[4] = 1
	binary.BigEndian.PutUint32(hdr[16:], crc32.Checksum(hdr[:16], crcTable))
	copy(data, hdr)
	saltFrames([][]byte{data[segHeaderLen:]}, segSalt(1)) // XOR again: unsalted
	fsys.setFileData(path, data)

	s = openT(t, testDir, fsys, 1<<20)
	storeRange(t, s.Group("old"), 31, 40, 1)
	mustClose(t, s)
	s = openT(t, testDir, fsys, 1<<20)
	defer mustClose(t, s)
	var l hraft.Log
	for i := uint64(1); i <= 40; i++ {
		if err := s.Group("old").GetLog(i, &l); err != nil || !sameLog(&l, mkLog("old", i, 1)) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if got := fsys.fileData(path); !bytes.Equal(got[:segHeaderLen], hdr) {
		t.Errorf("the version 1 header was rewritten")
	}
}

// activeSize is how far the writer has written the active segment.
func (s *Store) activeSize() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.activeSegment().size
}
