package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// kv is a record of a keyed test batch; a nil key is no key, a nil value
// a null one.
type kv struct{ key, value []byte }

// keyedBatch builds a batch of recs as a producer would send it.
func keyedBatch(tb testing.TB, codec int8, attrs int16, pid int64, epoch int16, seq int32, ts int64, recs []kv) []byte {
	tb.Helper()
	var body []byte
	for i, r := range recs {
		rec := []byte{0}
		rec = binary.AppendVarint(rec, int64(i)) // timestamp delta: ts+i
		rec = binary.AppendVarint(rec, int64(i))
		rec = appendVarBytes(rec, r.key)
		rec = appendVarBytes(rec, r.value)
		rec = binary.AppendVarint(rec, 0)
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	body = compressForTest(tb, codec, body)
	b := make([]byte, batchHeaderLen, batchHeaderLen+len(body))
	binary.BigEndian.PutUint32(b[offLength:], uint32(batchHeaderLen-batchPrefixLen+len(body)))
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(int16(codec)|attrs))
	binary.BigEndian.PutUint32(b[offLastOffsetDelt:], uint32(len(recs)-1))
	binary.BigEndian.PutUint64(b[offFirstTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts+int64(len(recs)-1)))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(seq))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(recs)))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
	return b
}

// modelRecord is what the workload appended at one offset.
type modelRecord struct {
	offset, ts int64
	key, value []byte
	control    bool
	batch      int64 // base offset of its batch
}

type cleanWorkload struct {
	recs    []modelRecord
	batches map[int64]BatchHeader // by base offset, as appended
	pidLast map[int64]int64       // producer -> base offset of its last data batch
}

// runKeyedWorkload appends n random batches: keys from a small pool,
// tombstones, keyless records, three idempotent producers and
// non-idempotent batches, every codec, and transaction markers.
func runKeyedWorkload(t testing.TB, l *Log, clk *fakeClock, rng *rand.Rand, n, keys int, w *cleanWorkload) {
	t.Helper()
	seqs := map[int64]int32{}
	for range n {
		clk.Advance(int64(1 + rng.IntN(5)))
		ts := clk.Now().UnixMilli()
		pid := int64(-1)
		if rng.IntN(2) == 0 {
			pid = int64(1 + rng.IntN(3))
		}
		var b []byte
		var recs []kv
		// A marker only after data of its producer: one of a producer
		// with no data would be kept for its epoch.
		control := pid >= 0 && seqs[pid] > 0 && rng.IntN(12) == 0
		if control {
			recs = []kv{{key: []byte{0, 0, 0, 1}, value: []byte{0, 0, 0, 0, 0, 7}}}
			b = keyedBatch(t, CompressionNone, attrControl|attrTransactional, pid, 0, -1, ts, recs)
		} else {
			recs = make([]kv, 1+rng.IntN(6))
			for i := range recs {
				if rng.IntN(20) != 0 {
					recs[i].key = fmt.Appendf(nil, "key-%d", rng.IntN(keys))
				}
				if rng.IntN(8) != 0 {
					recs[i].value = fmt.Appendf(nil, "v%d-%d", rng.Uint32(), len(w.recs)+i)
				}
			}
			seq := int32(-1)
			if pid >= 0 {
				seq = seqs[pid]
				seqs[pid] += int32(len(recs))
			}
			codec := CompressionNone
			if rng.IntN(3) == 0 {
				codec = int8(1 + rng.IntN(4))
			}
			b = keyedBatch(t, codec, 0, pid, 0, seq, ts, recs)
		}
		res := mustAppend(t, l, b)
		h := parseHeader(b)
		h.BaseOffset = res.BaseOffset
		w.batches[res.BaseOffset] = h
		if pid >= 0 && !control {
			w.pidLast[pid] = res.BaseOffset
		}
		for i, r := range recs {
			w.recs = append(w.recs, modelRecord{offset: res.BaseOffset + int64(i), ts: ts + int64(i), key: r.key, value: r.value, control: control, batch: res.BaseOffset})
		}
	}
}

// readAllBatches reads the whole log through Read and checks every batch:
// valid CRC, base offsets and record offsets strictly increasing.
func readAllBatches(t testing.TB, l *Log) ([]BatchHeader, []Record) {
	t.Helper()
	var hs []BatchHeader
	var recs []Record
	off, end := l.LogStartOffset(), l.EndOffset()
	lastRec := int64(-1)
	for off < end {
		b, err := l.Read(off, 1<<20, Obligatory, end)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(b) == 0 {
			t.Fatalf("read at %d (end %d) returned nothing", off, end)
		}
		for len(b) > 0 {
			h, err := checkBatch(b)
			if err != nil {
				t.Fatalf("batch after offset %d: %v", off, err)
			}
			if len(hs) > 0 && h.BaseOffset <= hs[len(hs)-1].LastOffset() {
				t.Fatalf("batch %d does not follow batch %d-%d", h.BaseOffset, hs[len(hs)-1].BaseOffset, hs[len(hs)-1].LastOffset())
			}
			if h.LastOffset() < off {
				t.Fatalf("read at %d returned batch ending at %d", off, h.LastOffset())
			}
			hs = append(hs, h)
			if err := ForEachRecord(b[:h.Size()], func(r Record) bool {
				if r.Offset <= lastRec || r.Offset < h.BaseOffset || r.Offset > h.LastOffset() {
					t.Fatalf("record offset %d after %d in batch %d-%d", r.Offset, lastRec, h.BaseOffset, h.LastOffset())
				}
				lastRec = r.Offset
				r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
				recs = append(recs, r)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return hs, recs
}

// cleanModel tracks, per batch, the first pass that covered it.
type cleanModel struct {
	w           *cleanWorkload
	coverTime   map[int64]int64 // batch base -> ms of the first clean covering it
	cleanedTo   int64
	lastMs      int64 // time of the last Clean that ran a pass
	deleteRetMs int64
}

// afterClean records a Clean at nowMs that ran passes and left the
// checkpoint at to. Every pass rewrites the whole cleaned part, so only
// the last Clean that ran one decides which tombstones are left.
func (m *cleanModel) afterClean(nowMs int64, passes int, to int64) {
	if passes == 0 {
		return
	}
	for base := range m.w.batches {
		if base < to {
			if _, ok := m.coverTime[base]; !ok {
				m.coverTime[base] = nowMs
			}
		}
	}
	m.cleanedTo, m.lastMs = to, nowMs
}

// check compares the log with the model.
func (m *cleanModel) check(t testing.TB, l *Log) []Record {
	t.Helper()
	hs, got := readAllBatches(t, l)
	// Below the cleaned point a key keeps its latest record among those
	// below that point: later ones were not in any map yet.
	latest := map[string]int64{}
	for _, r := range m.w.recs {
		if r.key != nil && !r.control && r.offset < m.cleanedTo {
			latest[string(r.key)] = r.offset
		}
	}
	byOff := map[int64]modelRecord{}
	for _, r := range m.w.recs {
		byOff[r.offset] = r
	}
	want := func(r modelRecord) bool {
		if r.offset >= m.cleanedTo {
			return true
		}
		if r.control {
			// The workload's markers decide no transaction's data:
			// they go after the horizon, as tombstones do.
			return m.lastMs <= m.coverTime[r.batch]+m.deleteRetMs
		}
		if r.key == nil {
			return false // keyless records go, as in Kafka
		}
		if latest[string(r.key)] != r.offset {
			return false
		}
		if r.value != nil {
			return true
		}
		return m.lastMs <= m.coverTime[r.batch]+m.deleteRetMs
	}
	i := 0
	for _, r := range m.w.recs {
		if !want(r) {
			continue
		}
		if i >= len(got) {
			t.Fatalf("record at %d (key %q) missing: log ends", r.offset, r.key)
		}
		g := got[i]
		if g.Offset != r.offset {
			mr, ok := byOff[g.Offset]
			t.Fatalf("record at %d (key %q value %q) missing; found %d (%v, key %q value %q, latest %d, cleaned to %d)",
				r.offset, r.key, r.value, g.Offset, ok, mr.key, mr.value, latest[string(mr.key)], m.cleanedTo)
		}
		if !bytes.Equal(g.Key, r.key) || (g.Key == nil) != (r.key == nil) || !bytes.Equal(g.Value, r.value) || (g.Value == nil) != (r.value == nil) || g.Timestamp != r.ts {
			t.Fatalf("record at %d: got key %q value %q ts %d, want %q %q %d", r.offset, g.Key, g.Value, g.Timestamp, r.key, r.value, r.ts)
		}
		i++
	}
	if i != len(got) {
		t.Fatalf("%d records beyond the model, first at %d", len(got)-i, got[i].Offset)
	}
	// Producers' last data batches survive, possibly empty; every batch
	// keeps its producer fields and offset range.
	have := map[int64]BatchHeader{}
	for _, h := range hs {
		have[h.BaseOffset] = h
		orig, ok := m.w.batches[h.BaseOffset]
		if !ok {
			t.Fatalf("batch %d was never appended", h.BaseOffset)
		}
		if h.LastOffsetDelta != orig.LastOffsetDelta || h.ProducerID != orig.ProducerID || h.ProducerEpoch != orig.ProducerEpoch ||
			h.BaseSequence != orig.BaseSequence || h.MaxTimestamp != orig.MaxTimestamp || h.IsControl() != orig.IsControl() {
			t.Fatalf("batch %d header changed: %+v, was %+v", h.BaseOffset, h, orig)
		}
		if h.Attributes&attrDeleteHorizon == 0 && h.FirstTimestamp != orig.FirstTimestamp {
			t.Fatalf("batch %d first timestamp changed without a delete horizon", h.BaseOffset)
		}
	}
	for pid, base := range m.w.pidLast {
		if _, ok := have[base]; !ok {
			t.Fatalf("producer %d's last batch %d is gone", pid, base)
		}
	}
	// A read at any offset starts at the first batch reaching it.
	for off := l.LogStartOffset(); off < l.EndOffset(); off += 1 + int64(len(m.w.recs)/50) {
		b, err := l.Read(off, 1, Obligatory, l.EndOffset())
		if err != nil || len(b) == 0 {
			t.Fatalf("read at %d: %d bytes, %v", off, len(b), err)
		}
		h := parseHeader(b)
		j := slices.IndexFunc(hs, func(h BatchHeader) bool { return h.LastOffset() >= off })
		if j < 0 || hs[j].BaseOffset != h.BaseOffset {
			t.Fatalf("read at %d starts at batch %d, want the one at index %d", off, h.BaseOffset, j)
		}
	}
	return got
}

// cleanTestConfig keeps the log in memory (memFS): cleans fsync a lot,
// which on a real disk would make these tests slow.
func cleanTestConfig(clk *fakeClock, segBytes int64) Config {
	cfg := testConfig(newMemFS())
	cfg.SegmentBytes = segBytes
	cfg.IndexIntervalBytes = 256
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	cfg.Now = clk.Now
	return cfg
}

// TestCleanProperties runs random keyed workloads interleaved with
// cleans and checks the log against a model after each.
func TestCleanProperties(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 7))
			clk := &fakeClock{}
			clk.ms.Store(1_000_000)
			dir := t.TempDir()
			cfg := cleanTestConfig(clk, int64(1024+rng.IntN(4096)))
			l := mustOpen(t, dir, cfg)
			defer func() { l.Close() }()
			w := &cleanWorkload{batches: map[int64]BatchHeader{}, pidLast: map[int64]int64{}}
			m := &cleanModel{w: w, coverTime: map[int64]int64{}, deleteRetMs: int64(rng.IntN(3)) * 100}
			keys := 5 + rng.IntN(60)
			for round := range 6 {
				runKeyedWorkload(t, l, clk, rng, 40+rng.IntN(80), keys, w)
				clk.Advance(int64(rng.IntN(150)))
				buffer := int64(0)
				if rng.IntN(2) == 0 {
					buffer = offsetMapEntryBytes * int64(1+rng.IntN(keys))
				}
				upTo := l.EndOffset()
				if rng.IntN(3) == 0 {
					upTo = int64(rng.IntN(int(upTo) + 1))
				}
				st, err := l.Clean(context.Background(), CleanOptions{UpTo: upTo, DeleteRetention: time.Duration(m.deleteRetMs) * time.Millisecond, DedupeBufferBytes: buffer})
				if err != nil {
					t.Fatalf("round %d: clean: %v", round, err)
				}
				if st.CleanedTo != l.FirstDirtyOffset() || st.CleanedTo > upTo && st.Passes > 0 {
					t.Fatalf("round %d: stats %+v, first dirty %d, upTo %d", round, st, l.FirstDirtyOffset(), upTo)
				}
				m.afterClean(clk.Now().UnixMilli(), st.Passes, st.CleanedTo)
				got := m.check(t, l)
				checkSegmentIndexes(t, l)
				if rng.IntN(3) == 0 {
					// Reopen: recovery must accept the holes and keep
					// everything.
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					if rng.IntN(2) == 0 {
						// Without a recovery point Open scans every
						// segment instead of trusting its indexes.
						if err := cfg.FS.Remove(dir + "/" + recoveryPointFile); err != nil {
							t.Fatal(err)
						}
					}
					l = mustOpen(t, dir, cfg)
					if _, again := readAllBatches(t, l); !recordsEqual(got, again) {
						t.Fatalf("round %d: reopened log differs", round)
					}
					if l.FirstDirtyOffset() != st.CleanedTo {
						t.Fatalf("round %d: reopened cleaner checkpoint %d, want %d", round, l.FirstDirtyOffset(), st.CleanedTo)
					}
				}
			}
		})
	}
}

func recordsEqual(a, b []Record) bool {
	return slices.EqualFunc(a, b, func(x, y Record) bool {
		return x.Offset == y.Offset && x.Timestamp == y.Timestamp && bytes.Equal(x.Key, y.Key) &&
			(x.Key == nil) == (y.Key == nil) && bytes.Equal(x.Value, y.Value) && (x.Value == nil) == (y.Value == nil)
	})
}

// TestCleanMultiPassSameResult cleans the same workload with an ample map
// and with one holding a few keys: the second takes several passes and
// keeps the same records.
func TestCleanMultiPassSameResult(t *testing.T) {
	run := func(buffer int64) ([]Record, CleanStats) {
		rng := rand.New(rand.NewPCG(42, 42))
		clk := &fakeClock{}
		clk.ms.Store(5_000)
		l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 2048))
		defer l.Close()
		w := &cleanWorkload{batches: map[int64]BatchHeader{}, pidLast: map[int64]int64{}}
		runKeyedWorkload(t, l, clk, rng, 150, 40, w)
		st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset(), DedupeBufferBytes: buffer, DeleteRetention: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		m := &cleanModel{w: w, coverTime: map[int64]int64{}, deleteRetMs: 3600_000}
		m.afterClean(clk.Now().UnixMilli(), st.Passes, st.CleanedTo)
		return m.check(t, l), st
	}
	one, st1 := run(0)
	many, st2 := run(offsetMapEntryBytes * 20)
	if st1.Passes != 1 || st2.Passes < 3 {
		t.Fatalf("passes %d and %d, want 1 and several", st1.Passes, st2.Passes)
	}
	if st1.CleanedTo != st2.CleanedTo {
		t.Fatalf("cleaned to %d and %d", st1.CleanedTo, st2.CleanedTo)
	}
	if !recordsEqual(one, many) {
		t.Fatalf("one pass kept %d records, several passes %d", len(one), len(many))
	}
	if st1.RecordsRemoved == 0 {
		t.Fatal("nothing was cleaned")
	}
}

// TestCleanTombstoneRetention: a tombstone stays through cleans until
// DeleteRetention after the first clean that kept it, then goes; the
// horizon survives a reopen.
func TestCleanTombstoneRetention(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(10_000)
	dir := t.TempDir()
	cfg := cleanTestConfig(clk, 1<<20)
	l := mustOpen(t, dir, cfg)
	defer func() { l.Close() }()
	for _, codec := range []int8{CompressionNone, CompressionZstd} {
		mustAppend(t, l, keyedBatch(t, codec, 0, -1, -1, -1, clk.Now().UnixMilli(), []kv{{[]byte("a"), []byte("1")}, {[]byte("b"), []byte("1")}}))
		mustAppend(t, l, keyedBatch(t, codec, 0, -1, -1, -1, clk.Now().UnixMilli(), []kv{{[]byte("a"), nil}, {[]byte("c"), []byte("1")}}))
	}
	// The active segment is never cleaned: roll it.
	l.SetConfig(Config{SegmentBytes: 1, RetentionMs: -1, RetentionBytes: -1, IndexIntervalBytes: 256, Now: clk.Now})
	mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, clk.Now().UnixMilli(), []kv{{[]byte("z"), []byte("1")}}))
	opts := CleanOptions{UpTo: l.EndOffset(), DeleteRetention: time.Minute}
	tombstones := func() int {
		_, recs := readAllBatches(t, l)
		n := 0
		for _, r := range recs {
			if r.Key != nil && r.Value == nil {
				n++
			}
		}
		return n
	}
	if _, err := l.Clean(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if n := tombstones(); n != 1 {
		t.Fatalf("after the first clean %d tombstones, want 1", n)
	}
	l.Close()
	l = mustOpen(t, dir, cfg)
	l.SetConfig(Config{SegmentBytes: 1, RetentionMs: -1, RetentionBytes: -1, IndexIntervalBytes: 256, Now: clk.Now})
	clk.Advance(59_000)
	if st, err := l.Clean(context.Background(), opts); err != nil || st.TombstonesRemoved != 0 {
		t.Fatalf("clean before the horizon: %+v %v", st, err)
	}
	if n := tombstones(); n != 1 {
		t.Fatalf("before the horizon %d tombstones, want 1", n)
	}
	// Dirty data makes the next clean run.
	mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, clk.Now().UnixMilli(), []kv{{[]byte("y"), []byte("1")}}))
	mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, clk.Now().UnixMilli(), []kv{{[]byte("x"), []byte("1")}}))
	clk.Advance(1_001)
	opts.UpTo = l.EndOffset()
	st, err := l.Clean(context.Background(), opts)
	if err != nil || st.TombstonesRemoved != 1 {
		t.Fatalf("clean at the horizon: %+v %v", st, err)
	}
	if n := tombstones(); n != 0 {
		t.Fatalf("after the horizon %d tombstones, want 0", n)
	}
}

// TestCleanBounds: the active segment, segments at or past UpTo and
// segments younger than MinCompactionLag are left alone; Cleanable
// reports the dirty bytes and a clean empties them.
func TestCleanBounds(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 300))
	defer l.Close()
	for i := range 40 {
		clk.Advance(1_000)
		mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, clk.Now().UnixMilli(), []kv{{[]byte("k"), fmt.Appendf(nil, "%d", i)}}))
	}
	if l.NumSegments() < 5 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	l.mu.RLock()
	bases := make([]int64, len(l.segs))
	for i, s := range l.segs {
		bases[i] = s.base
	}
	l.mu.RUnlock()
	// UpTo inside the third segment: only the first two are cleanable.
	c, err := l.Cleanable(CleanOptions{UpTo: bases[2] + 1})
	if err != nil || c.CleanableEnd != bases[2] || c.Dirty == 0 || c.Clean != 0 || c.DirtyRatio() != 1 {
		t.Fatalf("cleanable %+v %v", c, err)
	}
	// The first batch was stamped at 2,000 ms.
	if c.DirtySince != 2_000 {
		t.Fatalf("dirty since %d, want 2000", c.DirtySince)
	}
	st, err := l.Clean(context.Background(), CleanOptions{UpTo: bases[2] + 1})
	if err != nil || st.CleanedTo != bases[2] {
		t.Fatalf("clean: %+v %v", st, err)
	}
	_, recs := readAllBatches(t, l)
	if recs[0].Offset != bases[2]-1 {
		t.Fatalf("first surviving record %d, want %d", recs[0].Offset, bases[2]-1)
	}
	if l.LogStartOffset() != 0 {
		t.Fatalf("log start moved to %d", l.LogStartOffset())
	}
	c, _ = l.Cleanable(CleanOptions{UpTo: bases[2]})
	if c.Dirty != 0 || c.Clean == 0 || c.DirtyRatio() != 0 || c.DirtySince != -1 {
		t.Fatalf("after clean: %+v", c)
	}
	// A lag covering the last 10 seconds stops at the first segment
	// holding a younger batch.
	lag := CleanOptions{UpTo: l.EndOffset(), MinCompactionLag: 10 * time.Second}
	c, _ = l.Cleanable(lag)
	if c.CleanableEnd >= bases[len(bases)-1] || c.CleanableEnd <= bases[2] {
		t.Fatalf("lag: cleanable end %d (segments %v)", c.CleanableEnd, bases)
	}
	st, err = l.Clean(context.Background(), lag)
	if err != nil || st.CleanedTo != c.CleanableEnd {
		t.Fatalf("lag clean: %+v %v, want to %d", st, err, c.CleanableEnd)
	}
	_, recs = readAllBatches(t, l)
	for _, r := range recs[1:] {
		if r.Offset < c.CleanableEnd-1 {
			t.Fatalf("record %d below the cleaned end survived", r.Offset)
		}
	}
	// Everything cleanable: one record in the closed segments, and the
	// active segment untouched.
	st, err = l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()})
	if err != nil || st.CleanedTo != bases[len(bases)-1] {
		t.Fatalf("full clean: %+v %v", st, err)
	}
	_, recs = readAllBatches(t, l)
	if recs[0].Offset != bases[len(bases)-1]-1 || recs[len(recs)-1].Offset != 39 {
		t.Fatalf("records %d..%d", recs[0].Offset, recs[len(recs)-1].Offset)
	}
	// Nothing left: a clean is a no-op.
	if st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()}); err != nil || st.Passes != 0 {
		t.Fatalf("idle clean: %+v %v", st, err)
	}
}

// TestCleanReadersAndAppends: reads and appends go on while cleans run;
// a reader pinned to a replaced segment keeps reading it.
func TestCleanReadersAndAppends(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 1024))
	defer l.Close()
	rng := rand.New(rand.NewPCG(3, 3))
	w := &cleanWorkload{batches: map[int64]BatchHeader{}, pidLast: map[int64]int64{}}
	runKeyedWorkload(t, l, clk, rng, 200, 20, w)
	m := &cleanModel{w: w, coverTime: map[int64]int64{}}

	// Pin the first segment as a reader would, then clean it away.
	l.mu.RLock()
	pinned := l.segs[0]
	pinnedSize := pinned.size
	pinned.acquire()
	l.mu.RUnlock()
	st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()})
	if err != nil {
		t.Fatal(err)
	}
	m.afterClean(clk.Now().UnixMilli(), st.Passes, st.CleanedTo)
	old := make([]byte, pinnedSize)
	if err := readFull(pinned.log, old, 0); err != nil {
		t.Fatalf("pinned replaced segment: %v", err)
	}
	if _, err := ValidateBatches(old); err != nil {
		t.Fatalf("pinned segment bytes: %v", err)
	}
	pinned.release()

	done := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			// Every read returns valid batches, offsets only growing.
			off, end := l.LogStartOffset(), l.EndOffset()
			for off < end {
				b, err := l.Read(off, 4096, Obligatory, end)
				if err == nil && len(b) == 0 && off < l.FirstDirtyOffset() {
					// A clean since end was read removed the batches
					// left below it: the next one is at or past end.
					break
				}
				if err != nil || len(b) == 0 {
					done <- fmt.Errorf("read at %d: %d bytes, %v", off, len(b), err)
					return
				}
				for len(b) > 0 {
					h, err := checkBatch(b)
					if err != nil || h.LastOffset() < off {
						done <- fmt.Errorf("read at %d: batch %d-%d, %v", off, h.BaseOffset, h.LastOffset(), err)
						return
					}
					off = h.LastOffset() + 1
					b = b[h.Size():]
				}
			}
		}
	}()
	for i := range 6 {
		runKeyedWorkload(t, l, clk, rng, 30, 20, w)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		buffer := int64(0)
		if i%2 == 1 {
			buffer = offsetMapEntryBytes * 15
		}
		st, err := l.Clean(ctx, CleanOptions{UpTo: l.EndOffset(), DedupeBufferBytes: buffer})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		m.afterClean(clk.Now().UnixMilli(), st.Passes, st.CleanedTo)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m.check(t, l)
}

// TestCleanConcurrentAppendsRace appends from another goroutine while
// cleaning (for the race detector) and checks nothing is lost.
func TestCleanConcurrentAppendsRace(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 1024))
	defer l.Close()
	for i := range 300 {
		mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, 1, []kv{{fmt.Appendf(nil, "k%d", i%10), []byte("x")}}))
	}
	errc := make(chan error, 1)
	go func() {
		for i := range 300 {
			if _, err := l.Append(keyedBatch(t, CompressionNone, 0, -1, -1, -1, 1, []kv{{fmt.Appendf(nil, "k%d", i%10), []byte("y")}}), AppendOptions{}); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for range 5 {
		if _, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 600 {
		t.Fatalf("end %d", l.EndOffset())
	}
	readAllBatches(t, l)
}

// TestCleanAbortedByTruncate: a truncation below the cleaned range
// during a pass makes the swap give up and leave the log as truncated.
func TestCleanAbortedByTruncate(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 512))
	defer l.Close()
	for i := range 60 {
		mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, 1, []kv{{fmt.Appendf(nil, "k%d", i%3), []byte("x")}}))
	}
	// Run a pass by hand up to the swap, truncate, then swap.
	l.mu.RLock()
	old := slices.Clone(l.segs[:2])
	gens := []uint64{old[0].gen.Load(), old[1].gen.Load()}
	sizes := []int64{old[0].size, old[1].size}
	l.mu.RUnlock()
	if err := l.TruncateTo(old[1].base + 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.swapCleaned(old, gens, sizes, nil, old[1].base); !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("swap after truncate: %v", err)
	}
	if st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()}); err != nil || st.Passes != 1 {
		t.Fatalf("clean after truncate: %+v %v", st, err)
	}
	readAllBatches(t, l)
}

// TestWithinMatchesReadCleaned is TestWithinMatchesRead's property on a
// cleaned log, whose offsets have holes inside and between batches and
// between segments.
func TestWithinMatchesReadCleaned(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 4096))
	defer l.Close()
	w := &cleanWorkload{batches: map[int64]BatchHeader{}, pidLast: map[int64]int64{}}
	runKeyedWorkload(t, l, clk, rng, 400, 30, w)
	if st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()}); err != nil || st.RecordsRemoved == 0 {
		t.Fatalf("clean: %+v %v", st, err)
	}
	end := l.EndOffset()
	modes := []ReadMode{Strict, Obligatory}
	randomRead := func(near int64) (int64, int, ReadMode, int64) {
		offset := min(max(near+int64(rng.IntN(200))-50, 0), end-1)
		return offset, 1 + rng.IntN(4<<10), modes[rng.IntN(2)], offset + 1 + rng.Int64N(end-offset)
	}
	found := 0
	for range 5000 {
		o, m, md, u := randomRead(rng.Int64N(end))
		earlier, err := l.Read(o, m, md, u)
		if err != nil {
			t.Fatal(err)
		}
		if len(earlier) == 0 {
			continue
		}
		for range 8 {
			lo, lm, lmd, lu := randomRead(o)
			want, err := l.Read(lo, lm, lmd, lu)
			if err != nil {
				t.Fatal(err)
			}
			start, stop, ok := Within(earlier, lo, lm, lmd, lu)
			if !ok {
				continue
			}
			found++
			if got := earlier[start:stop]; !bytes.Equal(got, want) {
				t.Fatalf("Read(%d, %d, %v, %d): Within gives %d bytes, Read %d", lo, lm, lmd, lu, len(got), len(want))
			}
		}
	}
	if found < 100 {
		t.Fatalf("only %d reads found within earlier ones", found)
	}
}

// TestCleanCancelAndThrottle: a cancelled clean leaves the log and the
// directory as they were; a throttled one takes at least its budget.
func TestCleanCancelAndThrottle(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	dir := t.TempDir()
	cfg := cleanTestConfig(clk, 2048)
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	for i := range 200 {
		mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, 1, []kv{{fmt.Appendf(nil, "k%d", i%7), bytes.Repeat([]byte("v"), 50)}}))
	}
	before, _ := readAllBatches(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Clean(ctx, CleanOptions{UpTo: l.EndOffset()}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled clean: %v", err)
	}
	if after, _ := readAllBatches(t, l); len(after) != len(before) || l.FirstDirtyOffset() != 0 {
		t.Fatalf("cancelled clean changed the log")
	}
	ents, _ := cfg.FS.ReadDir(dir)
	for _, e := range ents {
		if bytes.HasSuffix([]byte(e.Name()), []byte(cleanedSuffix)) || e.Name() == cleanSwapFile {
			t.Fatalf("%s left by a cancelled clean", e.Name())
		}
	}
	size := l.Size()
	start := time.Now()
	st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset(), IOBytesPerSecond: size * 4})
	if err != nil || st.Passes != 1 {
		t.Fatalf("throttled clean: %+v %v", st, err)
	}
	// The map reads the dirty bytes, the rewrite reads and writes them
	// again: well over a quarter second at four log sizes a second.
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("throttled clean of %d bytes took %v", size, d)
	}
}

// checkSegmentIndexes verifies that every closed segment's in-memory and
// on-disk indexes are what a rebuild from its .log gives.
func checkSegmentIndexes(t testing.TB, l *Log) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs[:len(l.segs)-1] {
		sc := batchScanner{f: s.log, limit: s.size, buf: make([]byte, 64<<10)}
		x := indexer{base: s.base, interval: l.cfg.IndexIntervalBytes, maxTs: -1, offMaxTs: -1}
		next := s.base
		for {
			h, pos, _, err := sc.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("segment %d: %v", s.base, err)
			}
			x.add(h, pos)
			next = h.LastOffset() + 1
		}
		x.maybeTime()
		if !slices.Equal(x.idx, s.idx.entries) || !slices.Equal(x.tim, s.tidx.entries) || next != s.next || x.maxTs != s.maxTs || x.offMaxTs != s.offMaxTs {
			t.Fatalf("segment %d: indexes %v %v next %d maxTs %d/%d, rebuilt %v %v %d %d/%d",
				s.base, s.idx.entries, s.tidx.entries, s.next, s.maxTs, s.offMaxTs, x.idx, x.tim, next, x.maxTs, x.offMaxTs)
		}
		b, err := readFile(l.fsys, segmentName(l.dir, s.base, extIndex))
		if err != nil {
			t.Fatal(err)
		}
		es, err := loadOffsetIndex(b, s.base, s.size)
		if err != nil || !slices.Equal(es, x.idx) {
			t.Fatalf("segment %d: index file %v %v, want %v", s.base, es, err, x.idx)
		}
		tb, err := readFile(l.fsys, segmentName(l.dir, s.base, extTimeIndex))
		if err != nil {
			t.Fatal(err)
		}
		if tes, err := loadTimeIndex(tb, s.base, uint32(max(next-1-s.base, 0))); err != nil || !slices.Equal(tes, x.tim) {
			t.Fatalf("segment %d: time index file %v %v, want %v", s.base, tes, err, x.tim)
		}
	}
}

// TestCleanIndexesAndTruncate: cleaned segments carry the indexes a
// rebuild would give; TruncateTo into the cleaned part lowers the
// cleaner checkpoint, and the log reopens and grows as usual.
func TestCleanIndexesAndTruncate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	dir := t.TempDir()
	cfg := cleanTestConfig(clk, 1500)
	cfg.IndexIntervalBytes = 100
	l := mustOpen(t, dir, cfg)
	defer func() { l.Close() }()
	w := &cleanWorkload{batches: map[int64]BatchHeader{}, pidLast: map[int64]int64{}}
	runKeyedWorkload(t, l, clk, rng, 300, 40, w)
	st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()})
	if err != nil {
		t.Fatal(err)
	}
	checkSegmentIndexes(t, l)
	hs, _ := readAllBatches(t, l)
	// A surviving batch in the middle of the cleaned part.
	var cut int64
	for _, h := range hs {
		if h.BaseOffset > st.CleanedTo/2 {
			cut = h.BaseOffset
			break
		}
	}
	if cut == 0 || cut >= st.CleanedTo {
		t.Fatalf("no batch to cut at below %d", st.CleanedTo)
	}
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if l.FirstDirtyOffset() != cut || l.EndOffset() != cut {
		t.Fatalf("after truncate: first dirty %d, end %d, want %d", l.FirstDirtyOffset(), l.EndOffset(), cut)
	}
	runKeyedWorkload(t, l, clk, rng, 50, 40, w)
	before, _ := readAllBatches(t, l)
	l.Close()
	l = mustOpen(t, dir, cfg)
	if after, _ := readAllBatches(t, l); !slices.EqualFunc(before, after, func(a, b BatchHeader) bool { return a == b }) {
		t.Fatal("reopened log differs")
	}
	if _, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()}); err != nil {
		t.Fatal(err)
	}
	checkSegmentIndexes(t, l)
	readAllBatches(t, l)
}
