package walstore

import (
	"path/filepath"
	"testing"

	hraft "github.com/hashicorp/raft"
)

// TestHandOffGivesEachEntryOnce: the first GetLog of a handed-off index
// returns the very slice StoreLogsHandOff was given, every later one a
// copy read from the log with the same contents, so a caller that
// rewrites what it took never changes what anyone else reads.
func TestHandOffGivesEachEntryOnce(t *testing.T) {
	s := openT(t, testDir, newFaultFS(), 1<<20)
	defer mustClose(t, s)
	gs := s.Group("big-f")
	logs := mkLogs(gs.name, 1, 30, 1)
	if err := gs.StoreLogsHandOff(logs); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.HandOffBytes <= 0 {
		t.Fatalf("nothing held after StoreLogsHandOff: %+v", st)
	}
	for i, want := range logs {
		var got hraft.Log
		if err := gs.GetLog(want.Index, &got); err != nil {
			t.Fatal(err)
		}
		if !sameLog(&got, want) {
			t.Fatalf("index %d: handed off %+v, stored %+v", want.Index, got, *want)
		}
		if len(want.Data) > 0 && &got.Data[0] != &want.Data[0] {
			t.Fatalf("index %d: not the slice that was stored", want.Index)
		}
		for j := range got.Data { // the taker owns it
			got.Data[j] ^= 0xff
		}
		var again hraft.Log
		if err := gs.GetLog(want.Index, &again); err != nil {
			t.Fatal(err)
		}
		if !sameLog(&again, mkLog(gs.name, want.Index, 1)) {
			t.Fatalf("index %d: a second read after the first taker rewrote its copy: %+v", want.Index, again)
		}
		if len(again.Data) > 0 && &again.Data[0] == &want.Data[0] {
			t.Fatalf("index %d: handed out twice", want.Index)
		}
		if st := s.Stats(); st.HandedOff != uint64(i+1) {
			t.Fatalf("HandedOff %d after %d takes", st.HandedOff, i+1)
		}
	}
	if st := s.Stats(); st.HandOffBytes != 0 {
		t.Fatalf("%d bytes still held after every entry was taken", st.HandOffBytes)
	}
}

// TestHandOffFollowsTheLog: what the hand-off holds is never other than
// what the log holds at that index: a truncated tail's held entries are
// forgotten before the new ones are stored at the same indexes, taking
// an index drops the held ones before it, entries that do not continue
// the held ones replace them, and a group's hand-off is its own.
func TestHandOffFollowsTheLog(t *testing.T) {
	s := openT(t, testDir, newFaultFS(), 1<<20)
	defer mustClose(t, s)
	a, b := s.Group("a"), s.Group("b")
	read := func(gs *GroupStore, index uint64) hraft.Log {
		t.Helper()
		var l hraft.Log
		if err := gs.GetLog(index, &l); err != nil {
			t.Fatalf("GetLog(%s %d): %v", gs.name, index, err)
		}
		return l
	}
	check := func(gs *GroupStore, index, term uint64) {
		t.Helper()
		if got := read(gs, index); !sameLog(&got, mkLog(gs.name, index, term)) {
			t.Fatalf("%s %d: got term %d %q, want term %d", gs.name, index, got.Term, got.Data, term)
		}
	}
	if err := a.StoreLogsHandOff(mkLogs("a", 1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLogsHandOff(mkLogs("b", 1, 10, 1)); err != nil {
		t.Fatal(err)
	}

	// A follower's conflict truncation, then the new leader's entries.
	if err := a.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	if err := a.StoreLogsHandOff(mkLogs("a", 6, 12, 2)); err != nil {
		t.Fatal(err)
	}
	for i := uint64(6); i <= 12; i++ {
		check(a, i, 2)
	}
	for i := uint64(1); i <= 5; i++ {
		check(a, i, 1)
	}
	// Taking 5 of b drops 1..4, which the log still serves.
	check(b, 5, 1)
	held := s.Stats().HandedOff
	check(b, 2, 1)
	if s.Stats().HandedOff != held {
		t.Fatal("an index before the last one taken was handed off")
	}

	// Entries that do not continue the held ones replace them; an index
	// past the log's end is not found, whatever was held.
	if err := b.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	var l hraft.Log
	if err := b.GetLog(7, &l); err == nil {
		t.Fatalf("GetLog of a deleted index returned %+v", l)
	}
	if err := b.StoreLogsHandOff(mkLogs("b", 11, 20, 3)); err != nil {
		t.Fatal(err)
	}
	for i := uint64(11); i <= 20; i++ {
		check(b, i, 3)
	}
	if st := s.Stats(); st.HandOffBytes != 0 {
		t.Fatalf("%d bytes held after every entry was taken or dropped", st.HandOffBytes)
	}
}

// TestHandOffIsBounded: a group holds at most maxHandOffEntries, the
// store at most its HandOffBytes; entries past either are read from the
// log.
func TestHandOffIsBounded(t *testing.T) {
	s := openT(t, testDir, newFaultFS(), 64<<20)
	defer mustClose(t, s)
	gs := s.Group("g")
	if err := gs.StoreLogsHandOff(mkLogs("g", 1, maxHandOffEntries, 1)); err != nil {
		t.Fatal(err)
	}
	if err := gs.StoreLogsHandOff(mkLogs("g", maxHandOffEntries+1, maxHandOffEntries+1, 1)); err != nil {
		t.Fatal(err)
	}
	var l hraft.Log
	if err := gs.GetLog(maxHandOffEntries+1, &l); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.HandedOff != 0 {
		t.Fatalf("an entry past the group's bound was held: %+v", st)
	}

	big := s.Group("big")
	data := make([]byte, DefaultHandOffBytes/2+1)
	for i := uint64(1); i <= 2; i++ {
		if err := big.StoreLogsHandOff([]*hraft.Log{{Index: i, Term: 1, Type: hraft.LogCommand, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.HandOffBytes > DefaultHandOffBytes {
		t.Fatalf("%d bytes held, bound %d", st.HandOffBytes, DefaultHandOffBytes)
	}

	// A store given a bound of its own keeps to it.
	const bound = 1 << 20
	small, err := Open(filepath.Join(t.TempDir(), "small"), Options{FS: newFaultFS(), SegmentBytes: 64 << 20, HandOffBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, small)
	sg := small.Group("big-s")
	data = make([]byte, bound/4)
	for i := uint64(1); i <= 8; i++ {
		if err := sg.StoreLogsHandOff([]*hraft.Log{{Index: i, Term: 1, Type: hraft.LogCommand, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	if st := small.Stats(); st.HandOffBytes > bound || st.HandOffBytes < bound/2 {
		t.Fatalf("%d bytes held, bound %d", st.HandOffBytes, bound)
	}
}

// TestHandOffReleased: a group that stops gives its held entries' bytes
// back to the store, and its log still serves every index.
func TestHandOffReleased(t *testing.T) {
	s := openT(t, testDir, newFaultFS(), 1<<20)
	defer mustClose(t, s)
	gs := s.Group("big-r")
	if err := gs.StoreLogsHandOff(mkLogs(gs.name, 1, 20, 1)); err != nil {
		t.Fatal(err)
	}
	if s.Stats().HandOffBytes == 0 {
		t.Fatal("nothing held")
	}
	gs.ReleaseHandOff()
	if st := s.Stats(); st.HandOffBytes != 0 {
		t.Fatalf("%d bytes still held after ReleaseHandOff", st.HandOffBytes)
	}
	for i := uint64(1); i <= 20; i++ {
		var l hraft.Log
		if err := gs.GetLog(i, &l); err != nil || !sameLog(&l, mkLog(gs.name, i, 1)) {
			t.Fatalf("index %d after release: %+v, %v", i, l, err)
		}
	}
	if st := s.Stats(); st.HandedOff != 0 {
		t.Fatalf("%d entries handed off after release", st.HandedOff)
	}
}
