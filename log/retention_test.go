package log

import (
	"errors"
	"os"
	"testing"
)

func TestRetentionMs(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(100_000)
	cfg := testConfig(nil)
	cfg.SegmentBytes = 600
	cfg.RetentionMs = 10_000
	cfg.Now = clock.Now
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	// Segment timestamps: 3 old segments, then fresh data.
	for i := 0; i < 6; i++ {
		mustAppend(t, l, simpleBatch(t, 1, 80_000+int64(i), 200)) // 2 per segment
	}
	for i := 0; i < 2; i++ {
		mustAppend(t, l, simpleBatch(t, 1, 99_000, 200))
	}
	if n := l.NumSegments(); n != 4 {
		t.Fatalf("segments %d, want 4", n)
	}
	n, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || l.LogStartOffset() != 6 || l.NumSegments() != 1 {
		t.Fatalf("removed %d, start %d, segments %d; want 3, 6, 1", n, l.LogStartOffset(), l.NumSegments())
	}
	if _, err := os.Stat(segFile(dir, 0, extLog)); !os.IsNotExist(err) {
		t.Fatalf("expired segment file still present: %v", err)
	}
	if _, err := l.Read(0, 100, Obligatory, 8); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read of deleted offset: %v", err)
	}
	// Everything expired, including the active segment: roll, empty log.
	clock.Advance(20_000)
	if n, err := l.EnforceRetention(); err != nil || n != 1 {
		t.Fatalf("removed %d err %v, want 1", n, err)
	}
	if l.LogStartOffset() != 8 || l.EndOffset() != 8 || l.Size() != 0 {
		t.Fatalf("start %d end %d size %d, want 8 8 0", l.LogStartOffset(), l.EndOffset(), l.Size())
	}
	if res := mustAppend(t, l, simpleBatch(t, 1, 120_000, 1)); res.BaseOffset != 8 || res.LogStartOffset != 8 {
		t.Fatalf("append after full expiry: %+v", res)
	}
}

func TestRetentionBytes(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 600
	cfg.RetentionMs = -1
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	var batch int64
	for i := 0; i < 7; i++ {
		b := simpleBatch(t, 1, 1, 200)
		batch = int64(len(b))
		mustAppend(t, l, b)
	}
	// segments: [0,1] [2,3] [4,5] [6]
	cfg.RetentionBytes = 3 * batch
	l.SetConfig(cfg)
	n, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || l.LogStartOffset() != 4 || l.Size() != 3*batch {
		t.Fatalf("removed %d start %d size %d", n, l.LogStartOffset(), l.Size())
	}
	if n, _ := l.EnforceRetention(); n != 0 {
		t.Fatalf("second pass removed %d", n)
	}
	if hs := readAll(t, l, 4); len(hs) != 3 {
		t.Fatalf("%d batches left", len(hs))
	}
}

func TestDeleteRecordsBeforePersisted(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 600
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 6; i++ {
		mustAppend(t, l, simpleBatch(t, 2, 1, 100)) // 2 batches per segment
	}
	if err := l.DeleteRecordsBefore(13); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("delete past end: %v", err)
	}
	if err := l.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 5 || l.NumSegments() != 2 {
		t.Fatalf("start %d segments %d, want 5 2", l.LogStartOffset(), l.NumSegments())
	}
	if err := l.DeleteRecordsBefore(3); err != nil || l.LogStartOffset() != 5 {
		t.Fatalf("moving start backwards: %v start %d", err, l.LogStartOffset())
	}
	l.Close()
	l = mustOpen(t, dir, cfg)
	if l.LogStartOffset() != 5 || l.EndOffset() != 12 {
		t.Fatalf("after reopen start %d end %d", l.LogStartOffset(), l.EndOffset())
	}
	if _, err := l.Read(4, 100, Obligatory, 12); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start after reopen: %v", err)
	}
	// Up to the end: the active segment stays, the log reads as empty.
	if err := l.DeleteRecordsBefore(12); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.LogStartOffset() != 12 || l.EndOffset() != 12 {
		t.Fatalf("start %d end %d, want 12 12", l.LogStartOffset(), l.EndOffset())
	}
	if _, ok, _ := func() (int64, bool, error) { o, _, ok, err := l.MaxTimestamp(); return o, ok, err }(); ok {
		t.Fatal("MaxTimestamp ok on a log with nothing visible")
	}
}

// A crash between persisting the log start and deleting files leaves
// segments wholly below the start; Open removes them.
func TestOpenRemovesSegmentsBelowStart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 300
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 4; i++ {
		mustAppend(t, l, simpleBatch(t, 1, 1, 200))
	}
	l.Close()
	writeCheckpoint(OSFS{}, dir, logStartFile, 2)
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.LogStartOffset() != 2 || l.NumSegments() != 2 {
		t.Fatalf("start %d segments %d", l.LogStartOffset(), l.NumSegments())
	}
	if _, err := os.Stat(segFile(dir, 1, extLog)); !os.IsNotExist(err) {
		t.Fatalf("segment below start not removed")
	}
}

// A reader pinning a segment keeps its file alive across deletion; the file
// leaves the segment namespace at once (renamed to .deleted, so Open and a
// new segment with the same base never see it) and disappears when the
// reader releases it.
func TestDeletionWaitsForReaders(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 300
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	for i := 0; i < 3; i++ {
		mustAppend(t, l, simpleBatch(t, 1, 1, 200))
	}
	l.mu.RLock()
	pinned := l.segs[0]
	pinned.acquire()
	l.mu.RUnlock()
	if err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segFile(dir, 0, extLog) + deletedSuffix); err != nil {
		t.Fatalf("file removed while pinned: %v", err)
	}
	if _, err := os.Stat(segFile(dir, 0, extLog)); !os.IsNotExist(err) {
		t.Fatalf("deleted segment still under its live name: %v", err)
	}
	sc := batchScanner{f: pinned.log, limit: pinned.size, whole: true}
	if _, _, _, err := sc.next(); err != nil {
		t.Fatalf("pinned segment unreadable: %v", err)
	}
	pinned.release()
	for _, ext := range []string{extLog, extIndex, extTimeIndex} {
		if _, err := os.Stat(segFile(dir, 0, ext) + deletedSuffix); !os.IsNotExist(err) {
			t.Fatalf("%s not removed after release: %v", ext, err)
		}
	}
}
