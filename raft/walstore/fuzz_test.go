package walstore

import (
	"testing"

	hraft "github.com/hashicorp/raft"
)

// FuzzRecovery damages the last segment of a store (overwriting bytes at
// an offset, or appending) and reopens it. Open must not panic; damage
// past the header must be cut, never fail Open; and every entry whose
// record ends before the damage must come back intact.
func FuzzRecovery(f *testing.F) {
	f.Add([]byte{0xff}, uint16(40), false)
	f.Add([]byte{0, 0, 0, 0}, uint16(segHeaderLen), false)
	f.Add([]byte{0, 0, 0, 12, 1, 2, 3, 4, 1, 1, 'a'}, uint16(0), true)
	f.Add([]byte("garbage after the last record"), uint16(0), true)
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff}, uint16(300), false)
	f.Add([]byte{'x'}, uint16(3), false)
	f.Fuzz(func(t *testing.T, data []byte, at uint16, appendIt bool) {
		if len(data) > 4096 {
			return
		}
		fsys := newFaultFS()
		s := openT(t, testDir, fsys, 2<<10)
		storeRange(t, s.Group("a"), 1, 25, 1)
		if err := s.Group("b").SetUint64([]byte("CurrentTerm"), 3); err != nil {
			t.Fatal(err)
		}
		storeRange(t, s.Group("b"), 7, 16, 2)
		if err := s.Group("a").DeleteRange(1, 4); err != nil {
			t.Fatal(err)
		}
		// Where every entry is, and which segment is last.
		s.mu.RLock()
		lastSeq := s.activeSegment().seq
		type where struct {
			group string
			index uint64
			at    loc
		}
		var entries []where
		for name, g := range s.groups {
			for i, l := range g.locs {
				entries = append(entries, where{name, g.first + uint64(i), l})
			}
		}
		termAt := s.groups["b"].stable[0].at
		s.mu.RUnlock()
		mustClose(t, s)

		name := testDir + "/" + segName(lastSeq)
		b := fsys.fileData(name)
		damage := len(b)
		if appendIt {
			b = append(b, data...)
		} else {
			damage = int(at) % (len(b) + 1)
			end := damage + len(data)
			if end > len(b) {
				b = append(b, make([]byte, end-len(b))...)
			}
			copy(b[damage:], data)
		}
		fsys.setFileData(name, b)

		s, err := Open(testDir, Options{FS: fsys, SegmentBytes: 2 << 10})
		if err != nil {
			if damage < segHeaderLen {
				return // a damaged header with records behind it is refused
			}
			t.Fatalf("Open after damage at %d of the last segment: %v", damage, err)
		}
		defer mustClose(t, s)
		got := dumpState(t, s) // also checks every readable entry's bytes
		for _, e := range entries {
			if e.at.seg == lastSeq && int(e.at.off+e.at.n) > damage {
				continue
			}
			st := got[e.group]
			if e.index < st.First || e.index > st.Last {
				t.Fatalf("group %s entry %d (before the damage at %d) lost: now %d..%d", e.group, e.index, damage, st.First, st.Last)
			}
			var l hraft.Log
			if err := s.Group(e.group).GetLog(e.index, &l); err != nil {
				t.Fatal(err)
			}
		}
		if termAt.seg != lastSeq || int(termAt.off+termAt.n) <= damage {
			if v, err := s.Group("b").GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
				t.Fatalf("stable value written before the damage at %d: %d, %v", damage, v, err)
			}
		}
		// The store still takes writes after recovery.
		storeRange(t, s.Group("c"), 1, 1, 1)
	})
}
