package log

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func segFile(dir string, base int64, ext string) string { return segmentName(dir, base, ext) }

// TestRecoveryTornTail cuts the active segment at random points inside the
// last batch: every whole batch must survive and appends must continue at
// the offset after the last whole batch.
func TestRecoveryTornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 20; iter++ {
		dir := t.TempDir()
		cfg := testConfig(nil)
		cfg.SegmentBytes = 2000
		l := mustOpen(t, dir, cfg)
		var lastRes AppendResult
		var lastSize int
		for i := 0; i < 12; i++ {
			b := simpleBatch(t, 1+rng.IntN(4), int64(i), 10+rng.IntN(200))
			lastRes, lastSize = mustAppend(t, l, b), len(b)
			if i == 5 && iter%2 == 0 {
				l.Sync() // recovery point in the middle of the log
			}
		}
		l.mu.RLock()
		active := l.active()
		activeBase, activeSize := active.base, active.size
		l.mu.RUnlock()
		// Simulate a crash: no Close, files cut under the log.
		l.Close()
		os.Remove(filepath.Join(dir, recoveryPointFile))
		if iter%2 == 0 {
			writeCheckpoint(OSFS{}, dir, recoveryPointFile, 6)
		}
		cut := activeSize - int64(lastSize) + 1 + rng.Int64N(int64(lastSize)-1)
		if err := os.Truncate(segFile(dir, activeBase, extLog), cut); err != nil {
			t.Fatal(err)
		}

		l = mustOpen(t, dir, cfg)
		if got := l.EndOffset(); got != lastRes.BaseOffset {
			t.Fatalf("iter %d: end offset %d after torn tail, want %d", iter, got, lastRes.BaseOffset)
		}
		hs := readAll(t, l, 0)
		if len(hs) != 11 {
			t.Fatalf("iter %d: %d whole batches readable, want 11", iter, len(hs))
		}
		res := mustAppend(t, l, simpleBatch(t, 2, 99, 10))
		if res.BaseOffset != lastRes.BaseOffset {
			t.Fatalf("iter %d: next append at %d, want %d", iter, res.BaseOffset, lastRes.BaseOffset)
		}
		if hs := readAll(t, l, 0); len(hs) != 12 {
			t.Fatalf("iter %d: after re-append %d batches", iter, len(hs))
		}
		l.Close()
	}
}

func TestRecoveryCorruptMiddleBatch(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(nil))
	var positions []int64
	var pos int64
	for i := 0; i < 5; i++ {
		b := simpleBatch(t, 2, int64(i), 100)
		positions = append(positions, pos)
		pos += int64(len(b))
		mustAppend(t, l, b)
	}
	l.Close()
	f, err := os.OpenFile(segFile(dir, 0, extLog), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a record byte of batch 2 (offsets 4-5).
	one := []byte{0}
	f.ReadAt(one, positions[2]+80)
	one[0] ^= 0x55
	f.WriteAt(one, positions[2]+80)
	f.Close()
	// The recovery point says everything was synced; the active segment is
	// still validated because it may hold unsynced data in general.
	l = mustOpen(t, dir, testConfig(nil))
	defer l.Close()
	if l.EndOffset() != 4 {
		t.Fatalf("end %d, want 4 (truncated at corrupt batch)", l.EndOffset())
	}
	if st, _ := os.Stat(segFile(dir, 0, extLog)); st.Size() != positions[2] {
		t.Fatalf("file size %d, want %d", st.Size(), positions[2])
	}
	if hs := readAll(t, l, 0); len(hs) != 2 {
		t.Fatalf("%d batches, want 2", len(hs))
	}
	if res := mustAppend(t, l, simpleBatch(t, 1, 1, 1)); res.BaseOffset != 4 {
		t.Fatalf("next append at %d", res.BaseOffset)
	}
}

// Corruption in an older segment (with no recovery point) truncates it and
// drops every later segment: offsets must stay contiguous.
func TestRecoveryCorruptOlderSegmentDropsLater(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 600
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 9; i++ {
		mustAppend(t, l, simpleBatch(t, 1, int64(i), 200))
	}
	if l.NumSegments() < 3 {
		t.Fatalf("want >= 3 segments, have %d", l.NumSegments())
	}
	l.Close()
	os.Remove(filepath.Join(dir, recoveryPointFile))
	f, _ := os.OpenFile(segFile(dir, 0, extLog), os.O_RDWR, 0)
	f.WriteAt([]byte{9}, offMagic) // first batch: bad magic
	f.Close()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.EndOffset() != 0 || l.NumSegments() != 1 || l.Size() != 0 {
		t.Fatalf("end %d segments %d size %d, want empty", l.EndOffset(), l.NumSegments(), l.Size())
	}
	if _, err := os.Stat(segFile(dir, 2, extLog)); !os.IsNotExist(err) {
		t.Fatalf("later segment not removed: %v", err)
	}
}

func TestIndexRebuild(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 3000
	cfg.IndexIntervalBytes = 100
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 40; i++ {
		mustAppend(t, l, simpleBatch(t, 2, int64(1000+i), 60))
	}
	want := readAll(t, l, 0)
	wantEnd := l.EndOffset()
	wantTsOff, wantTs, _, _ := l.MaxTimestamp()
	l.Close()

	ents, _ := os.ReadDir(dir)
	removed := 0
	for i, e := range ents {
		switch filepath.Ext(e.Name()) {
		case extIndex, extTimeIndex:
			if i%3 == 0 {
				// Garbage instead of missing: must fail the sanity check.
				os.WriteFile(filepath.Join(dir, e.Name()), []byte("WOIX\x01\x00\x00\x00\xff\xff\xff\xff\xff"), 0o644)
			} else {
				os.Remove(filepath.Join(dir, e.Name()))
			}
			removed++
		}
	}
	if removed < 4 {
		t.Fatalf("only %d index files", removed)
	}
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.EndOffset() != wantEnd {
		t.Fatalf("end %d, want %d", l.EndOffset(), wantEnd)
	}
	for off := int64(0); off < wantEnd; off++ {
		b, err := l.Read(off, 1, Obligatory, wantEnd)
		if err != nil {
			t.Fatal(err)
		}
		hs, _ := ValidateBatches(b)
		if len(hs) != 1 || hs[0] != want[off/2] {
			t.Fatalf("offset %d: got %+v", off, hs)
		}
	}
	if st, err := os.Stat(segFile(dir, 0, extIndex)); err != nil || st.Size() <= indexHeaderLen {
		t.Fatalf("index not rebuilt: %v", err)
	}
	if off, ts, ok, _ := l.MaxTimestamp(); !ok || off != wantTsOff || ts != wantTs {
		t.Fatalf("MaxTimestamp after rebuild (%d,%d), want (%d,%d)", off, ts, wantTsOff, wantTs)
	}
}

// Sealed segments below the recovery point are loaded from their indexes
// without a full scan; state must match what was written.
func TestReopenFromIndexes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 2000
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 30; i++ {
		mustAppend(t, l, simpleBatch(t, 3, int64(500-i%7), 50))
	}
	want := readAll(t, l, 0)
	end, size := l.EndOffset(), l.Size()
	mo, mt, _, _ := l.MaxTimestamp()
	l.Close()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.EndOffset() != end || l.Size() != size {
		t.Fatalf("end/size %d/%d, want %d/%d", l.EndOffset(), l.Size(), end, size)
	}
	got := readAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	if o, ts, _, _ := l.MaxTimestamp(); o != mo || ts != mt {
		t.Fatalf("MaxTimestamp (%d,%d) want (%d,%d)", o, ts, mo, mt)
	}
	if res := mustAppend(t, l, simpleBatch(t, 1, 1, 1)); res.BaseOffset != end {
		t.Fatalf("append at %d, want %d", res.BaseOffset, end)
	}
}
