package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
)

// batchSpec is one batch a test appends; building two logs from the same
// specs yields the same bytes, segments and indexes.
type batchSpec struct {
	n        int   // records
	ts       int64 // timestamp of every record
	valueLen int
	codec    int8
	epoch    int32
	lat      int64 // LogAppendTime, 0 for CreateTime
}

// encoded caches batchSpec encodings: compressing is most of the cost of
// the crash-point tests, which rebuild the same log many times.
var encoded sync.Map // batchSpec -> []byte

// encode returns a fresh copy (Append stamps the buffer in place).
func (b batchSpec) encode(tb testing.TB) []byte {
	if v, ok := encoded.Load(b); ok {
		return slices.Clone(v.([]byte))
	}
	recs := make([]testRecord, b.n)
	for i := range recs {
		recs[i] = testRecord{ts: b.ts, value: bytes.Repeat([]byte{byte('a' + i%26)}, b.valueLen)}
	}
	enc := encodeBatch(tb, b.codec, recs...)
	encoded.Store(b, enc)
	return slices.Clone(enc)
}

// multiSpecs spans several segments with testConfig-based truncConfig:
// timestamps go up and down so that maxTimestamp and the time index do not
// simply follow offsets, and some batches are compressed or LogAppendTime.
var multiSpecs = []batchSpec{
	{n: 3, ts: 1000, valueLen: 40},
	{n: 1, ts: 1005, valueLen: 120},
	{n: 5, ts: 990, valueLen: 20, codec: CompressionGzip},
	{n: 2, ts: 1010, valueLen: 80},
	{n: 1, ts: 1003, valueLen: 200, epoch: 4},
	{n: 4, ts: 1020, valueLen: 30, lat: 5000},
	{n: 2, ts: 1001, valueLen: 150, codec: CompressionLZ4},
	{n: 1, ts: 1030, valueLen: 10},
	{n: 6, ts: 1025, valueLen: 25, epoch: 5},
	{n: 2, ts: 1040, valueLen: 300},
	{n: 1, ts: 1035, valueLen: 60, codec: CompressionZstd},
	{n: 3, ts: 1050, valueLen: 90},
	{n: 2, ts: 1045, valueLen: 110},
}

// moreSpecs are appended after a truncation, to both logs under comparison.
var moreSpecs = []batchSpec{
	{n: 2, ts: 2000, valueLen: 70},
	{n: 1, ts: 1990, valueLen: 250, codec: CompressionSnappy},
	{n: 3, ts: 2010, valueLen: 40},
}

func truncConfig(fsys FS) Config {
	cfg := testConfig(fsys)
	cfg.SegmentBytes = 700
	cfg.IndexIntervalBytes = 100
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	clock := &fakeClock{}
	clock.ms.Store(1_000_000)
	cfg.Now = clock.Now
	return cfg
}

func appendSpecs(tb testing.TB, l *Log, specs []batchSpec) {
	tb.Helper()
	for i, s := range specs {
		if _, err := l.Append(s.encode(tb), AppendOptions{LeaderEpoch: s.epoch, LogAppendTime: s.lat}); err != nil {
			tb.Fatalf("append spec %d: %v", i, err)
		}
	}
}

// specBases returns the base offset of every spec when appended from 0,
// plus the end offset.
func specBases(specs []batchSpec) []int64 {
	bases := []int64{0}
	for _, s := range specs {
		bases = append(bases, bases[len(bases)-1]+int64(s.n))
	}
	return bases
}

// logState is what a consumer can observe of a log's data.
type logState struct {
	start, end int64
	raw        []byte // every batch from the one holding start to the end
}

func (s logState) String() string {
	return fmt.Sprintf("[%d,%d) %d bytes", s.start, s.end, len(s.raw))
}

func (s logState) equal(o logState) bool {
	return s.start == o.start && s.end == o.end && bytes.Equal(s.raw, o.raw)
}

func stateOf(tb testing.TB, l *Log) logState {
	tb.Helper()
	st := logState{start: l.LogStartOffset(), end: l.EndOffset()}
	for off, i := st.start, 0; off < st.end; i++ {
		if i > 10000 {
			tb.Fatal("stateOf: no progress")
		}
		b, err := l.Read(off, 1<<20, Obligatory, st.end)
		if err != nil {
			tb.Fatalf("Read(%d): %v", off, err)
		}
		// Stored batches, not produced ones: a cleaned batch may hold
		// fewer records than its offset range.
		if len(b) == 0 {
			tb.Fatalf("Read(%d) returned nothing before the end %d", off, st.end)
		}
		for rest := b; len(rest) > 0; {
			h, err := checkBatch(rest)
			if err != nil {
				tb.Fatalf("Read(%d) returned invalid batches: %v", off, err)
			}
			rest = rest[h.Size():]
			off = h.LastOffset() + 1
		}
		st.raw = append(st.raw, b...)
	}
	return st
}

// compareLogs checks that got serves exactly what want serves: the same
// bytes from every offset under several size limits, the same timestamp
// lookups (which exercise the time and offset indexes) and batch headers.
func compareLogs(t *testing.T, got, want *Log) {
	t.Helper()
	if g, w := got.LogStartOffset(), want.LogStartOffset(); g != w {
		t.Fatalf("LogStartOffset %d, want %d", g, w)
	}
	if g, w := got.EndOffset(), want.EndOffset(); g != w {
		t.Fatalf("EndOffset %d, want %d", g, w)
	}
	if g, w := got.Size(), want.Size(); g != w {
		t.Fatalf("Size %d, want %d", g, w)
	}
	if g, w := got.NumSegments(), want.NumSegments(); g != w {
		t.Fatalf("NumSegments %d, want %d", g, w)
	}
	start, end := want.LogStartOffset(), want.EndOffset()
	for off := start; off <= end; off++ {
		for _, rd := range []struct {
			max  int
			mode ReadMode
		}{{1 << 20, Obligatory}, {1, Obligatory}, {400, Strict}} {
			g, gerr := got.Read(off, rd.max, rd.mode, end)
			w, werr := want.Read(off, rd.max, rd.mode, end)
			if gerr != nil || werr != nil {
				t.Fatalf("Read(%d, %d): errors %v / %v", off, rd.max, gerr, werr)
			}
			if !bytes.Equal(g, w) {
				t.Fatalf("Read(%d, %d, %v): %d bytes, want %d (content differs: %v)", off, rd.max, rd.mode, len(g), len(w), len(g) == len(w))
			}
		}
	}
	var probes []int64
	for ts := int64(985); ts <= 1055; ts++ {
		probes = append(probes, ts)
	}
	probes = append(probes, 1985, 1990, 1995, 2000, 2005, 2010, 2015, 4999, 5000, 5001)
	for _, ts := range probes {
		go1, gt, gok, gerr := got.OffsetForTimestamp(ts)
		wo, wt, wok, werr := want.OffsetForTimestamp(ts)
		if gerr != nil || werr != nil || go1 != wo || gt != wt || gok != wok {
			t.Fatalf("OffsetForTimestamp(%d) = %d,%d,%v,%v; want %d,%d,%v,%v", ts, go1, gt, gok, gerr, wo, wt, wok, werr)
		}
	}
	go1, gt, gok, gerr := got.MaxTimestamp()
	wo, wt, wok, werr := want.MaxTimestamp()
	if gerr != nil || werr != nil || go1 != wo || gt != wt || gok != wok {
		t.Fatalf("MaxTimestamp = %d,%d,%v,%v; want %d,%d,%v,%v", go1, gt, gok, gerr, wo, wt, wok, werr)
	}
	var gh, wh []BatchHeader
	if err := got.Batches(start, func(h BatchHeader) bool { gh = append(gh, h); return true }); err != nil {
		t.Fatal(err)
	}
	if err := want.Batches(start, func(h BatchHeader) bool { wh = append(wh, h); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gh, wh) {
		t.Fatalf("Batches differ: %d vs %d headers", len(gh), len(wh))
	}
}

// TestTruncateToEveryBoundary truncates a multi-segment log at each batch
// boundary and compares it, live and after reopening, with a log built
// directly up to that point; then both get the same appends and must still
// match.
func TestTruncateToEveryBoundary(t *testing.T) {
	bases := specBases(multiSpecs)
	for _, variant := range []struct {
		name   string
		reopen bool // reopen before truncating: sealed segments load from their index files
	}{{"live", false}, {"reopened", true}} {
		for bi, off := range bases {
			t.Run(fmt.Sprintf("%s/offset=%d", variant.name, off), func(t *testing.T) {
				t.Parallel()
				cfg := truncConfig(nil)
				dirA := t.TempDir()
				a := mustOpen(t, dirA, cfg)
				appendSpecs(t, a, multiSpecs)
				if a.NumSegments() < 4 {
					t.Fatalf("want >= 4 segments, have %d", a.NumSegments())
				}
				if variant.reopen {
					a.Close()
					a = mustOpen(t, dirA, cfg)
				}
				b := mustOpen(t, t.TempDir(), cfg)
				defer b.Close()
				appendSpecs(t, b, multiSpecs[:bi])

				if err := a.TruncateTo(off); err != nil {
					t.Fatalf("TruncateTo(%d): %v", off, err)
				}
				compareLogs(t, a, b)
				if off == 0 {
					// The first segment is kept, empty.
					if _, err := os.Stat(segFile(dirA, 0, extLog)); err != nil {
						t.Fatalf("first segment gone: %v", err)
					}
				}
				a.Close()
				a = mustOpen(t, dirA, cfg)
				defer a.Close()
				compareLogs(t, a, b)

				// Appends continue at the truncated offset.
				res, err := a.Append(moreSpecs[0].encode(t), AppendOptions{})
				if err != nil || res.BaseOffset != off {
					t.Fatalf("append after truncate: %+v %v, want base %d", res, err, off)
				}
				mustAppendOpts(t, b, moreSpecs[0])
				for _, s := range moreSpecs[1:] {
					mustAppendOpts(t, a, s)
					mustAppendOpts(t, b, s)
				}
				compareLogs(t, a, b)
				a.Close()
				a = mustOpen(t, dirA, cfg)
				compareLogs(t, a, b)
			})
		}
	}
}

func mustAppendOpts(tb testing.TB, l *Log, s batchSpec) AppendResult {
	tb.Helper()
	res, err := l.Append(s.encode(tb), AppendOptions{LeaderEpoch: s.epoch, LogAppendTime: s.lat})
	if err != nil {
		tb.Fatalf("Append: %v", err)
	}
	return res
}

// Repeated truncations, each followed by appends, keep the log consistent
// with one built directly.
func TestTruncateToRepeated(t *testing.T) {
	cfg := truncConfig(nil)
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg)
	defer func() { l.Close() }()
	appendSpecs(t, l, multiSpecs)
	bases := specBases(multiSpecs)
	// Truncate ever lower, re-adding part of what was removed each time.
	for _, bi := range []int{11, 7, 8, 2, 3, 0} {
		if err := l.TruncateTo(bases[bi]); err != nil {
			t.Fatalf("TruncateTo(%d): %v", bases[bi], err)
		}
		appendSpecs(t, l, multiSpecs[bi:bi+2])
		if err := l.TruncateTo(bases[bi+1]); err != nil {
			t.Fatalf("TruncateTo(%d) after re-append: %v", bases[bi+1], err)
		}
		want := mustOpen(t, t.TempDir(), cfg)
		appendSpecs(t, want, multiSpecs[:bi+1])
		compareLogs(t, l, want)
		l.Close()
		l = mustOpen(t, dir, cfg)
		compareLogs(t, l, want)
		want.Close()
	}
}

func TestTruncateToRejects(t *testing.T) {
	cfg := truncConfig(nil)
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	appendSpecs(t, l, multiSpecs)
	bases := specBases(multiSpecs)
	end := l.EndOffset()
	before := stateOf(t, l)

	// Every offset inside a batch is refused with a non-range error.
	for i, s := range multiSpecs {
		for off := bases[i] + 1; off < bases[i]+int64(s.n); off++ {
			err := l.TruncateTo(off)
			if err == nil || errors.Is(err, ErrOffsetOutOfRange) || errors.Is(err, ErrLogFailed) {
				t.Fatalf("TruncateTo(%d) inside batch %d: %v, want a not-a-boundary error", off, bases[i], err)
			}
		}
	}
	for _, off := range []int64{-1, end + 1, end + 100} {
		if err := l.TruncateTo(off); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("TruncateTo(%d): %v, want ErrOffsetOutOfRange", off, err)
		}
	}
	if err := l.TruncateTo(end); err != nil {
		t.Fatalf("TruncateTo(end): %v", err)
	}
	if got := stateOf(t, l); !got.equal(before) {
		t.Fatalf("refused truncations changed the log: %v, want %v", got, before)
	}

	// Below the log start: out of range, even on a boundary.
	if err := l.DeleteRecordsBefore(bases[4]); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(bases[3]); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("TruncateTo below start: %v", err)
	}
	// The log start itself is fine; the log becomes empty there.
	if err := l.TruncateTo(bases[4]); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != bases[4] || l.EndOffset() != bases[4] {
		t.Fatalf("start %d end %d, want %d", l.LogStartOffset(), l.EndOffset(), bases[4])
	}
	if res := mustAppend(t, l, simpleBatch(t, 2, 1, 1)); res.BaseOffset != bases[4] {
		t.Fatalf("append at %d, want %d", res.BaseOffset, bases[4])
	}

	// A log start inside a batch is no boundary.
	if err := l.DeleteRecordsBefore(bases[4] + 1); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(bases[4] + 1); err == nil || errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("TruncateTo(start inside batch): %v", err)
	}
	if err := l.TruncateTo(l.EndOffset()); err != nil {
		t.Fatalf("TruncateTo(end): %v", err)
	}
	l.Close()
	if err := l.TruncateTo(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("TruncateTo after Close: %v", err)
	}
}

// An fsync failure during TruncateTo is sticky, and Open afterwards finds
// the old or the truncated log.
func TestTruncateToFsyncFailureSticky(t *testing.T) {
	ffs := &faultFS{}
	dir := t.TempDir()
	cfg := truncConfig(ffs)
	l := mustOpen(t, dir, cfg)
	appendSpecs(t, l, multiSpecs)
	bases := specBases(multiSpecs)
	old := stateOf(t, l)
	ffs.set(false, true)
	if err := l.TruncateTo(bases[6]); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("TruncateTo with failing fsync: %v, want ErrLogFailed", err)
	}
	ffs.set(false, false)
	if _, err := l.Append(simpleBatch(t, 1, 1, 1), AppendOptions{}); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after failed truncate: %v", err)
	}
	l.Close()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	got := stateOf(t, l)
	want := mustOpen(t, t.TempDir(), cfg)
	defer want.Close()
	appendSpecs(t, want, multiSpecs[:6])
	if !got.equal(old) && !got.equal(stateOf(t, want)) {
		t.Fatalf("after reopen: %v, want old %v or truncated %v", got, old, stateOf(t, want))
	}
}

func TestReset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(end int64) int64
	}{
		{"zero", func(int64) int64 { return 0 }},
		{"lower", func(int64) int64 { return 7 }},
		{"inside", func(end int64) int64 { return end / 2 }},
		{"end", func(end int64) int64 { return end }},
		{"higher", func(end int64) int64 { return end + 1000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := truncConfig(nil)
			dir := t.TempDir()
			l := mustOpen(t, dir, cfg)
			appendSpecs(t, l, multiSpecs)
			if err := l.DeleteRecordsBefore(10); err != nil {
				t.Fatal(err)
			}
			s := tc.start(l.EndOffset())
			if err := l.Reset(s); err != nil {
				t.Fatalf("Reset(%d): %v", s, err)
			}
			check := func(stage string) {
				t.Helper()
				if l.LogStartOffset() != s || l.EndOffset() != s || l.Size() != 0 || l.NumSegments() != 1 {
					t.Fatalf("%s: start %d end %d size %d segments %d, want %d %d 0 1", stage,
						l.LogStartOffset(), l.EndOffset(), l.Size(), l.NumSegments(), s, s)
				}
				if _, _, ok, err := l.OffsetForTimestamp(0); ok || err != nil {
					t.Fatalf("%s: OffsetForTimestamp on empty log: %v %v", stage, ok, err)
				}
				if _, _, ok, err := l.MaxTimestamp(); ok || err != nil {
					t.Fatalf("%s: MaxTimestamp on empty log: %v %v", stage, ok, err)
				}
				if s > 0 {
					if _, err := l.Read(s-1, 100, Obligatory, s); !errors.Is(err, ErrOffsetOutOfRange) {
						t.Fatalf("%s: read below new start: %v", stage, err)
					}
				}
				if b, err := l.Read(s, 100, Obligatory, s); b != nil || err != nil {
					t.Fatalf("%s: read at new start: %v %v", stage, b, err)
				}
				files, _ := os.ReadDir(dir)
				var names []string
				for _, f := range files {
					names = append(names, f.Name())
				}
				// The new segment's index files come with its first
				// index entry, or from the recovery of a reopen.
				want := []string{fmt.Sprintf("%020d.log", s), logStartFile, recoveryPointFile}
				if stage == "reopened" {
					want = []string{
						fmt.Sprintf("%020d.index", s), fmt.Sprintf("%020d.log", s), fmt.Sprintf("%020d.timeindex", s),
						logStartFile, recoveryPointFile,
					}
				}
				if !slices.Equal(names, want) {
					t.Fatalf("%s: files %v, want %v", stage, names, want)
				}
			}
			check("live")
			l.Close()
			l = mustOpen(t, dir, cfg)
			check("reopened")
			appendSpecs(t, l, multiSpecs)
			want := mustOpen(t, t.TempDir(), cfg)
			defer want.Close()
			if err := want.Reset(s); err != nil {
				t.Fatal(err)
			}
			appendSpecs(t, want, multiSpecs)
			if l.LogStartOffset() != s || l.EndOffset() != s+specBases(multiSpecs)[len(multiSpecs)] {
				t.Fatalf("after appends: start %d end %d", l.LogStartOffset(), l.EndOffset())
			}
			compareLogs(t, l, want)
			l.Close()
			l = mustOpen(t, dir, cfg)
			defer l.Close()
			compareLogs(t, l, want)
		})
	}
}

// Readers pinning segments across a Reset keep reading consistent bytes,
// and their late unlinks never hit the new segment with the same base.
func TestResetWhileReaderPinned(t *testing.T) {
	cfg := truncConfig(nil)
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	appendSpecs(t, l, multiSpecs)
	l.mu.RLock()
	pinned := l.segs[0]
	pinned.acquire()
	l.mu.RUnlock()
	if err := l.Reset(0); err != nil {
		t.Fatal(err)
	}
	appendSpecs(t, l, multiSpecs[:2])
	sc := batchScanner{f: pinned.log, limit: pinned.size, whole: true}
	if _, _, _, err := sc.next(); err != nil {
		t.Fatalf("pinned segment unreadable after reset: %v", err)
	}
	pinned.release()
	if _, err := os.Stat(segFile(dir, 0, extLog)); err != nil {
		t.Fatalf("new segment removed by the old one's release: %v", err)
	}
	want := mustOpen(t, t.TempDir(), cfg)
	defer want.Close()
	appendSpecs(t, want, multiSpecs[:2])
	compareLogs(t, l, want)
}

// readChunks reads a log as a follower fetching it would: Read after Read.
func readChunks(tb testing.TB, l *Log, maxBytes int) [][]byte {
	tb.Helper()
	var out [][]byte
	end := l.EndOffset()
	for off, i := l.LogStartOffset(), 0; off < end; i++ {
		if i > 10000 {
			tb.Fatal("readChunks: no progress")
		}
		b, err := l.Read(off, maxBytes, Obligatory, end)
		if err != nil {
			tb.Fatal(err)
		}
		hs, err := ValidateBatches(b)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
		off = hs[len(hs)-1].LastOffset() + 1
	}
	return out
}

// splitBatches splits a records field into single batches.
func splitBatches(tb testing.TB, b []byte) [][]byte {
	hs, err := ValidateBatches(b)
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, h := range hs {
		out = append(out, b[:h.Size()])
		b = b[h.Size():]
	}
	return out
}

func TestAppendReplicatedCopiesLog(t *testing.T) {
	for _, tc := range []struct {
		name     string
		start    int64 // DeleteRecordsBefore on the source, at a segment base
		perBatch bool  // one AppendReplicated per batch instead of per Read
	}{
		{"from0/chunks", 0, false},
		{"from0/batches", 0, true},
		{"trimmed/chunks", -1, false},
		{"trimmed/batches", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := truncConfig(nil)
			a := mustOpen(t, t.TempDir(), cfg)
			defer a.Close()
			appendSpecs(t, a, multiSpecs)
			if tc.start < 0 {
				a.mu.RLock()
				tc.start = a.segs[2].base
				a.mu.RUnlock()
				if err := a.DeleteRecordsBefore(tc.start); err != nil {
					t.Fatal(err)
				}
			}
			dirB := t.TempDir()
			b := mustOpen(t, dirB, cfg)
			defer func() { b.Close() }()
			// B had other data before: the snapshot replaces it.
			appendSpecs(t, b, moreSpecs)
			if err := b.Reset(a.LogStartOffset()); err != nil {
				t.Fatal(err)
			}
			var chunks [][]byte
			for _, c := range readChunks(t, a, 500) {
				if tc.perBatch {
					chunks = append(chunks, splitBatches(t, c)...)
				} else {
					chunks = append(chunks, c)
				}
			}
			for _, c := range chunks {
				hs, _ := ValidateBatches(c)
				orig := slices.Clone(c)
				res, err := b.AppendReplicated(c)
				if err != nil {
					t.Fatalf("AppendReplicated at %d: %v", hs[0].BaseOffset, err)
				}
				if !bytes.Equal(c, orig) {
					t.Fatal("AppendReplicated modified its input")
				}
				wantLAT := int64(-1)
				if hs[0].IsLogAppendTime() {
					wantLAT = hs[0].MaxTimestamp
				}
				if res.BaseOffset != hs[0].BaseOffset || res.LastOffset != hs[len(hs)-1].LastOffset() ||
					res.LogStartOffset != a.LogStartOffset() || res.LogAppendTime != wantLAT {
					t.Fatalf("result %+v for batches %d-%d", res, hs[0].BaseOffset, hs[len(hs)-1].LastOffset())
				}
			}
			compareLogs(t, b, a)
			b.Close()
			b = mustOpen(t, dirB, cfg)
			compareLogs(t, b, a)
		})
	}
}

func TestAppendReplicatedRejects(t *testing.T) {
	cfg := truncConfig(nil)
	src := mustOpen(t, t.TempDir(), cfg)
	defer src.Close()
	appendSpecs(t, src, multiSpecs[:6])
	bases := specBases(multiSpecs)
	batch := func(i int) []byte {
		b, err := src.Read(bases[i], 1, Obligatory, src.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	if _, err := l.AppendReplicated(slices.Concat(batch(0), batch(1))); err != nil {
		t.Fatal(err)
	}
	corrupt := slices.Clone(batch(2))
	corrupt[len(corrupt)-1] ^= 1
	for _, tc := range []struct {
		name    string
		records []byte
		want    error
	}{
		{"gap", batch(3), ErrOffsetMismatch},
		{"overlap", batch(1), ErrOffsetMismatch},
		{"restart", batch(0), ErrOffsetMismatch},
		{"internal gap", slices.Concat(batch(2), batch(4)), ErrOffsetMismatch},
		{"internal overlap", slices.Concat(batch(2), batch(3), batch(3)), ErrOffsetMismatch},
		{"internal reorder", slices.Concat(batch(3), batch(2)), ErrOffsetMismatch},
		{"producer batch", simpleBatch(t, 1, 1, 1), ErrOffsetMismatch}, // base offset 0
		{"corrupt", corrupt, ErrCorruptBatch},
		{"trailing bytes", append(batch(2), 0, 0, 0), ErrCorruptBatch},
		{"empty", nil, ErrCorruptBatch},
	} {
		endBefore, sizeBefore := l.EndOffset(), l.Size()
		if _, err := l.AppendReplicated(tc.records); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if l.EndOffset() != endBefore || l.Size() != sizeBefore {
			t.Fatalf("%s: log changed: end %d size %d", tc.name, l.EndOffset(), l.Size())
		}
	}
	if _, err := l.AppendReplicated(slices.Concat(batch(2), batch(3), batch(4))); err != nil {
		t.Fatalf("contiguous batches: %v", err)
	}
	if got, want := stateOf(t, l), func() logState { s := stateOf(t, src); s.raw = s.raw[:l.Size()]; s.end = l.EndOffset(); return s }(); !got.equal(want) {
		t.Fatalf("replica %v, want %v", got, want)
	}
	// Ordinary appends continue after replicated ones.
	if res := mustAppend(t, l, simpleBatch(t, 1, 1, 1)); res.BaseOffset != bases[5] {
		t.Fatalf("append after replicated at %d, want %d", res.BaseOffset, bases[5])
	}
}

// A sealed segment that TruncateTo makes active again keeps the segment.ms
// clock of its first batch, as Open would give it, even if it was loaded
// from its index files and never appended to in this process.
func TestTruncateToSealedSegmentRollClock(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(5_000_000)
	cfg := testConfig(nil)
	cfg.SegmentBytes = 600
	cfg.SegmentMs = 3_600_000
	cfg.Now = clock.Now
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg)
	var bases []int64
	for i := 0; i < 6; i++ {
		bases = append(bases, mustAppend(t, l, simpleBatch(t, 1, 4_000_000, 200)).BaseOffset) // 2 per segment
	}
	l.Close()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if err := l.TruncateTo(bases[1]); err != nil {
		t.Fatal(err)
	}
	if n := l.NumSegments(); n != 1 {
		t.Fatalf("segments %d, want 1", n)
	}
	mustAppend(t, l, simpleBatch(t, 1, 4_000_000, 100))
	if n := l.NumSegments(); n != 1 {
		t.Fatalf("append rolled a segment younger than segment.ms: %d segments", n)
	}
	clock.Advance(cfg.SegmentMs)
	mustAppend(t, l, simpleBatch(t, 1, 4_000_000, 10))
	if n := l.NumSegments(); n != 2 {
		t.Fatalf("segment older than segment.ms not rolled: %d segments", n)
	}
}
