package log

import (
	"bytes"
	"errors"
	"testing"
)

func TestAppendReadRoundTrip(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	defer l.Close()

	sizes := []int{1, 5, 3}
	var want []byte
	next := int64(0)
	for _, n := range sizes {
		b := simpleBatch(t, n, 1000, 10)
		res := mustAppend(t, l, b)
		if res.BaseOffset != next || res.LastOffset != next+int64(n)-1 {
			t.Fatalf("append %d records: got [%d,%d], want base %d", n, res.BaseOffset, res.LastOffset, next)
		}
		if res.LogAppendTime != -1 || res.LogStartOffset != 0 {
			t.Fatalf("unexpected result %+v", res)
		}
		want = append(want, b...) // Append rewrote b in place
		next += int64(n)
	}
	if l.EndOffset() != 9 || l.Size() != int64(len(want)) {
		t.Fatalf("end %d size %d, want 9 %d", l.EndOffset(), l.Size(), len(want))
	}
	got, err := l.Read(0, 1<<20, Obligatory, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back differs from appended bytes")
	}
	hs, err := ValidateBatches(got)
	if err != nil {
		t.Fatalf("stored batches invalid (CRC not recomputed?): %v", err)
	}
	for i, h := range hs {
		if h.PartitionLeaderEpoch != 3 {
			t.Errorf("batch %d epoch %d, want 3", i, h.PartitionLeaderEpoch)
		}
	}
	if hs[1].BaseOffset != 1 || hs[2].BaseOffset != 6 {
		t.Fatalf("base offsets %d %d, want 1 6", hs[1].BaseOffset, hs[2].BaseOffset)
	}

	// An offset inside a batch returns the whole containing batch.
	got, err = l.Read(3, 1<<20, Obligatory, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if hs, _ := ValidateBatches(got); len(hs) != 2 || hs[0].BaseOffset != 1 {
		t.Fatalf("read from 3: got %d batches starting %d", len(hs), hs[0].BaseOffset)
	}
}

func TestAppendLogAppendTime(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	defer l.Close()
	res, err := l.Append(simpleBatch(t, 2, 100, 5), AppendOptions{LogAppendTime: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if res.LogAppendTime != 5000 {
		t.Fatalf("LogAppendTime %d", res.LogAppendTime)
	}
	b, _ := l.Read(0, 1<<20, Obligatory, l.EndOffset())
	hs, err := ValidateBatches(b)
	if err != nil {
		t.Fatal(err)
	}
	if !hs[0].IsLogAppendTime() || hs[0].MaxTimestamp != 5000 {
		t.Fatalf("header not stamped: %+v", hs[0])
	}
}

func TestAppendRejectsInvalid(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	defer l.Close()
	good := simpleBatch(t, 1, 1, 1)
	bad := simpleBatch(t, 1, 1, 1)
	bad[len(bad)-1] ^= 0xff
	if _, err := l.Append(append(good, bad...), AppendOptions{}); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("err %v, want ErrCorruptBatch", err)
	}
	if l.EndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("partial append visible: end %d size %d", l.EndOffset(), l.Size())
	}
}

func TestReadObligatoryVsStrict(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	defer l.Close()
	big := simpleBatch(t, 1, 1, 1000)
	small := simpleBatch(t, 1, 1, 10)
	mustAppend(t, l, big)
	mustAppend(t, l, small)
	mustAppend(t, l, simpleBatch(t, 1, 1, 10))

	got, err := l.Read(0, 100, Obligatory, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(big) {
		t.Fatalf("obligatory: got %d bytes, want exactly the first batch (%d)", len(got), len(big))
	}
	got, err = l.Read(0, 100, Strict, l.EndOffset())
	if err != nil || got != nil {
		t.Fatalf("strict: got %d bytes, err %v; want nothing", len(got), err)
	}
	// maxBytes fitting two small batches but not three.
	got, err = l.Read(1, 2*len(small)+10, Strict, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2*len(small) {
		t.Fatalf("strict two batches: got %d bytes, want %d", len(got), 2*len(small))
	}
	got, _ = l.Read(1, len(small)+len(small)/2, Obligatory, l.EndOffset())
	// The capacity is the buffer read into (the caller's memory
	// accounting charges it), the partial second batch dropped.
	if want := len(small) + len(small)/2; len(got) != len(small) || cap(got) != want {
		t.Fatalf("obligatory partial: got len %d cap %d, want len %d cap %d", len(got), cap(got), len(small), want)
	}
}

func TestReadUpToAndRange(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	defer l.Close()
	for i := 0; i < 4; i++ {
		mustAppend(t, l, simpleBatch(t, 2, 1, 10)) // offsets 0-1, 2-3, 4-5, 6-7
	}
	got, err := l.Read(0, 1<<20, Obligatory, 4)
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := ValidateBatches(got)
	if len(hs) != 2 || hs[1].LastOffset() != 3 {
		t.Fatalf("upTo 4: got %d batches", len(hs))
	}
	if got, err := l.Read(4, 1<<20, Obligatory, 4); got != nil || err != nil {
		t.Fatalf("offset == upTo: got %v %v, want empty", got, err)
	}
	if got, err := l.Read(8, 1<<20, Obligatory, 8); got != nil || err != nil {
		t.Fatalf("offset == end: got %v %v, want empty", got, err)
	}
	if _, err := l.Read(9, 1<<20, Obligatory, 9); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("offset > end: err %v", err)
	}
	if _, err := l.Read(-1, 1<<20, Obligatory, 8); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("negative offset: err %v", err)
	}
	if err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(2, 1<<20, Obligatory, 8); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("offset < start: err %v", err)
	}
	// The batch containing the start offset is served whole.
	got, _ = l.Read(3, 1<<20, Obligatory, 8)
	if hs, _ := ValidateBatches(got); hs[0].BaseOffset != 2 {
		t.Fatalf("read at start: first batch %d, want 2", hs[0].BaseOffset)
	}
}

func TestRollBySegmentBytes(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	b := simpleBatch(t, 1, 1, 300)
	for i := 0; i < 6; i++ {
		mustAppend(t, l, append([]byte(nil), b...))
	}
	// ~370-byte batches: two fit per 1000-byte segment.
	if n := l.NumSegments(); n != 3 {
		t.Fatalf("segments %d, want 3", n)
	}
	huge := simpleBatch(t, 1, 1, 3000)
	res := mustAppend(t, l, huge)
	if n := l.NumSegments(); n != 4 {
		t.Fatalf("oversized batch: segments %d, want 4 (fresh segment)", n)
	}
	mustAppend(t, l, simpleBatch(t, 1, 1, 1))
	if n := l.NumSegments(); n != 5 {
		t.Fatalf("after oversized batch: segments %d, want 5", n)
	}
	if hs := readAll(t, l, 0); len(hs) != 8 || hs[6].BaseOffset != res.BaseOffset {
		t.Fatalf("read across segments: %d batches", len(hs))
	}
	// Read never spans segments.
	got, _ := l.Read(0, 1<<20, Obligatory, l.EndOffset())
	if hs, _ := ValidateBatches(got); len(hs) != 2 {
		t.Fatalf("read crossed a segment boundary: %d batches", len(hs))
	}
}

func TestRollBySegmentMs(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(1_000_000)
	cfg := testConfig(nil)
	cfg.SegmentMs = 1000
	cfg.Now = clock.Now
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	mustAppend(t, l, simpleBatch(t, 1, 1, 1))
	clock.Advance(500)
	mustAppend(t, l, simpleBatch(t, 1, 1, 1))
	if n := l.NumSegments(); n != 1 {
		t.Fatalf("rolled too early: %d segments", n)
	}
	clock.Advance(600)
	res := mustAppend(t, l, simpleBatch(t, 1, 1, 1))
	if n := l.NumSegments(); n != 2 {
		t.Fatalf("segments %d, want 2", n)
	}
	l.mu.RLock()
	base := l.active().base
	l.mu.RUnlock()
	if base != res.BaseOffset {
		t.Fatalf("new segment base %d, want %d", base, res.BaseOffset)
	}
}

func TestBatchesIteration(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 500
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 10; i++ {
		mustAppend(t, l, simpleBatch(t, 3, int64(i), 50))
	}
	var bases []int64
	err := l.Batches(7, func(h BatchHeader) bool {
		bases = append(bases, h.BaseOffset)
		return len(bases) < 4
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) != 4 || bases[0] != 6 || bases[3] != 15 {
		t.Fatalf("bases %v, want [6 9 12 15]", bases)
	}
}

func TestClosed(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(nil))
	mustAppend(t, l, simpleBatch(t, 1, 1, 1))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(0, 100, Obligatory, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after close: %v", err)
	}
	if _, err := l.Append(simpleBatch(t, 1, 1, 1), AppendOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestWriteFailureIsAllOrNothing(t *testing.T) {
	ffs := &faultFS{}
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(ffs))
	mustAppend(t, l, simpleBatch(t, 1, 1, 10))
	ffs.set(true, false)
	two := append(simpleBatch(t, 1, 1, 10), simpleBatch(t, 1, 1, 10)...)
	if _, err := l.Append(two, AppendOptions{}); err == nil {
		t.Fatal("append succeeded despite failing write")
	}
	if l.EndOffset() != 1 {
		t.Fatalf("failed append visible: end %d", l.EndOffset())
	}
	ffs.set(false, false)
	if res := mustAppend(t, l, simpleBatch(t, 1, 1, 10)); res.BaseOffset != 1 {
		t.Fatalf("next append base %d, want 1", res.BaseOffset)
	}
	if hs := readAll(t, l, 0); len(hs) != 2 {
		t.Fatalf("%d batches readable, want 2", len(hs))
	}
	// An fsync failure is sticky.
	ffs.set(false, true)
	if err := l.Sync(); err == nil {
		t.Fatal("Sync succeeded despite fsync failure")
	}
	ffs.set(false, false)
	if _, err := l.Append(simpleBatch(t, 1, 1, 10), AppendOptions{}); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after fsync failure: %v, want ErrLogFailed", err)
	}
	l.Close()
	l = mustOpen(t, dir, testConfig(ffs))
	defer l.Close()
	if l.EndOffset() != 2 {
		t.Fatalf("after reopen end %d, want 2", l.EndOffset())
	}
}
