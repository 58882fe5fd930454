package walstore

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/weir-broker/weir/log"
)

const testDir = "/wal"

func openT(t testing.TB, dir string, fsys log.FS, segBytes int64) *Store {
	t.Helper()
	s, err := Open(dir, Options{FS: fsys, SegmentBytes: segBytes})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// entryData is the content of group's entry at index in term: every test
// can recompute what a stored entry must hold. In groups named big…,
// every eleventh entry is larger than inlineDataMin, so that StoreLogs
// writes its data from the caller's slice, between the records it copies.
func entryData(group string, index, term uint64) []byte {
	n := int(index*7+term) % 200
	if strings.HasPrefix(group, "big") && index%11 == 0 {
		n = inlineDataMin + int(index*13+term)%(2*inlineDataMin)
	}
	return bytes.Repeat([]byte(fmt.Sprintf("%s/%d/%d;", group, index, term)), 1+n/16)
}

func mkLog(group string, index, term uint64) *hraft.Log {
	l := &hraft.Log{Index: index, Term: term, Type: hraft.LogCommand, Data: entryData(group, index, term)}
	if index%3 == 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d", index))
		l.AppendedAt = time.Unix(1700000000, int64(index))
	}
	if index%5 == 0 {
		l.Type = hraft.LogConfiguration
	}
	return l
}

func mkLogs(group string, from, to, term uint64) []*hraft.Log {
	var out []*hraft.Log
	for i := from; i <= to; i++ {
		out = append(out, mkLog(group, i, term))
	}
	return out
}

func storeRange(t testing.TB, gs *GroupStore, from, to, term uint64) {
	t.Helper()
	if err := gs.StoreLogs(mkLogs(gs.name, from, to, term)); err != nil {
		t.Fatalf("StoreLogs(%s %d..%d): %v", gs.name, from, to, err)
	}
}

func sameLog(a, b *hraft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

// groupState is everything a group's view returns, for comparisons.
type groupState struct {
	First, Last uint64
	Terms       []uint64 // term of each entry First..Last
	Stable      map[string]string
}

// dumpState reads every group's log and stable keys through the public
// API, verifying each entry's contents against entryData.
func dumpState(t testing.TB, s *Store) map[string]groupState {
	t.Helper()
	out := map[string]groupState{}
	for _, name := range s.Groups() {
		gs := s.Group(name)
		st := groupState{Stable: map[string]string{}}
		st.First, _ = gs.FirstIndex()
		st.Last, _ = gs.LastIndex()
		for i := st.First; st.First > 0 && i <= st.Last; i++ {
			var l hraft.Log
			if err := gs.GetLog(i, &l); err != nil {
				t.Fatalf("group %s GetLog(%d) in %d..%d: %v", name, i, st.First, st.Last, err)
			}
			if want := mkLog(name, i, l.Term); !sameLog(&l, want) {
				t.Fatalf("group %s entry %d: got %+v want %+v", name, i, l, want)
			}
			st.Terms = append(st.Terms, l.Term)
		}
		for _, k := range stableKeys {
			if v, err := gs.Get([]byte(k)); err == nil {
				st.Stable[k] = string(v)
			} else if err.Error() != "not found" {
				t.Fatalf("group %s Get(%s): %v", name, k, err)
			}
		}
		out[name] = st
	}
	return out
}

var stableKeys = []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand", "k"}

func equalStates(a, b map[string]groupState) error {
	for _, name := range slices.Sorted(maps.Keys(a)) {
		x, ok := b[name]
		if !ok {
			return fmt.Errorf("group %s missing", name)
		}
		y := a[name]
		if x.First != y.First || x.Last != y.Last || !slices.Equal(x.Terms, y.Terms) || !maps.Equal(x.Stable, y.Stable) {
			return fmt.Errorf("group %s: %+v vs %+v", name, y, x)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			return fmt.Errorf("group %s unexpected", name)
		}
	}
	return nil
}

func isNotFound(err error) bool { return err != nil && err.Error() == "not found" }

func mustClose(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("Close: %v", err)
	}
}

// survivesEveryCrash opens an image of fsys after a crash in each mode
// (seeded with seed) and checks that group's log is exactly the entries
// first..last that storeRange stored in term 1.
func survivesEveryCrash(t *testing.T, fsys *faultFS, segBytes int64, group string, first, last, seed uint64) {
	t.Helper()
	for mode := range numCrashModes {
		img := openT(t, testDir, fsys.image(mode, rand.New(rand.NewPCG(uint64(mode), seed))), segBytes)
		g := img.Group(group)
		if f, _ := g.FirstIndex(); f != first {
			t.Errorf("%v: first index %d after the crash, want %d", mode, f, first)
		}
		if l, _ := g.LastIndex(); l != last {
			t.Errorf("%v: last index %d after the crash, want %d", mode, l, last)
		}
		var l hraft.Log
		for i := first; i <= last; i++ {
			if err := g.GetLog(i, &l); err != nil || !sameLog(&l, mkLog(group, i, 1)) {
				t.Fatalf("%v: entry %d after the crash: %v", mode, i, err)
			}
		}
		mustClose(t, img)
	}
}
