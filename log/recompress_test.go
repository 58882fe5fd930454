package log

import (
	"bytes"
	"fmt"
	"testing"
)

// TestRecompress: a batch re-encoded in another codec keeps its header
// (offsets, producer id, epoch, sequence, timestamps, count) and its
// records, with the new codec bits, length and a valid CRC, from every
// codec to every codec and at Kafka's levels.
func TestRecompress(t *testing.T) {
	var c Compressors
	defer c.Close()
	recs := []kv{{[]byte("k1"), bytes.Repeat([]byte("value "), 200)}, {nil, []byte("keyless")}, {[]byte("k2"), nil}}
	codecs := []int8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	levels := map[int8][]int{
		CompressionNone:   {0},
		CompressionSnappy: {0},
		CompressionGzip:   {GzipLevelDefault, GzipLevelMin, GzipLevelMax},
		CompressionLZ4:    {LZ4LevelMin, 5, LZ4LevelDefault, LZ4LevelMax},
		CompressionZstd:   {ZstdLevelMin, -1, ZstdLevelDefault, 9, ZstdLevelMax},
	}
	for _, from := range codecs {
		src := keyedBatch(t, from, attrTransactional, 7, 3, 100, 1_000, recs)
		want := recordsOf(t, src)
		for _, to := range codecs {
			for _, level := range levels[to] {
				t.Run(fmt.Sprintf("%d-to-%d-level-%d", from, to, level), func(t *testing.T) {
					data, err := BatchRecords(src)
					if err != nil {
						t.Fatal(err)
					}
					out, err := c.Recompress(src, data, to, level)
					if err != nil {
						t.Fatal(err)
					}
					hs, err := ValidateBatches(out)
					if err != nil {
						t.Fatalf("recompressed batch: %v", err)
					}
					got, old := hs[0], parseHeader(src)
					if got.Compression() != to {
						t.Fatalf("codec %d, want %d", got.Compression(), to)
					}
					got.Attributes, old.Attributes = got.Attributes&^attrCompressionMask, old.Attributes&^attrCompressionMask
					got.Length, got.CRC, old.Length, old.CRC = 0, 0, 0, 0
					if got != old {
						t.Fatalf("header changed:\n got %+v\nwant %+v", got, old)
					}
					if g := recordsOf(t, out); g != want {
						t.Fatalf("records changed:\n got %s\nwant %s", g, want)
					}
				})
			}
		}
	}
}

// recordsOf renders a batch's records for comparison.
func recordsOf(t *testing.T, batch []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := ForEachRecord(batch, func(r Record) bool {
		fmt.Fprintf(&b, "%d@%d %q=%q (key nil %v, value nil %v); ", r.Offset, r.Timestamp, r.Key, r.Value, r.Key == nil, r.Value == nil)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRecordReaderAllocates: reading an uncompressed batch's records
// allocates nothing, so the produce path may look at every record.
func TestRecordReaderAllocates(t *testing.T) {
	batch := keyedBatch(t, CompressionNone, 0, -1, -1, -1, 5, []kv{{[]byte("a"), []byte("1")}, {nil, []byte("2")}})
	var keyless int
	allocs := testing.AllocsPerRun(100, func() {
		data, err := BatchRecords(batch)
		if err != nil {
			t.Fatal(err)
		}
		keyless = 0
		r := NewRecordReader(parseHeader(batch), data)
		for rec, ok := r.Next(); ok; rec, ok = r.Next() {
			if rec.Key == nil {
				keyless++
			}
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
	})
	if allocs != 0 || keyless != 1 {
		t.Fatalf("%v allocations, %d keyless records", allocs, keyless)
	}
}

// TestRecordReaderMalformed: a record that does not decode stops the
// reader with ErrCorruptBatch.
func TestRecordReaderMalformed(t *testing.T) {
	batch := keyedBatch(t, CompressionNone, 0, -1, -1, -1, 5, []kv{{[]byte("a"), []byte("1")}})
	h := parseHeader(batch)
	r := NewRecordReader(h, []byte{0x7f})
	if _, ok := r.Next(); ok || r.Err() == nil {
		t.Fatalf("malformed record read: err %v", r.Err())
	}
}

// TestSegmentIndexBytesRolls: a segment rolls once one of its indexes
// holds what Kafka's index file of segment.index.bytes holds.
func TestSegmentIndexBytesRolls(t *testing.T) {
	cfg := testConfig(newMemFS())
	cfg.IndexIntervalBytes = 1 // an entry for every batch after a segment's first
	// Room for three time index entries (and four offset index ones):
	// the time index, whose timestamps grow with every batch, fills
	// first.
	cfg.SegmentIndexBytes = 3 * kafkaTimeIndexEntry
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for i := range 20 {
		mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, int64(i), []kv{{[]byte("k"), []byte("v")}}))
	}
	// Each segment takes its first batch unindexed and three indexed.
	if n := l.NumSegments(); n != 5 {
		t.Fatalf("%d segments, want 5", n)
	}
	l.SetConfig(Config{SegmentIndexBytes: 0, IndexIntervalBytes: 1, SegmentBytes: cfg.SegmentBytes, SegmentMs: cfg.SegmentMs, RetentionMs: -1, RetentionBytes: -1})
	for i := range 20 {
		mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, int64(i), []kv{{[]byte("k"), []byte("v")}}))
	}
	// The active segment, full by the old limit, takes them all.
	if n := l.NumSegments(); n != 5 {
		t.Fatalf("%d segments without an index limit, want 5", n)
	}
}

// TestSegmentJitter: segment.jitter.ms makes segments roll up to that
// much before segment.ms, each by its own random amount.
func TestSegmentJitter(t *testing.T) {
	rolledEarly := func(jitter int64) int {
		n := 0
		for range 40 {
			clk := &fakeClock{}
			cfg := testConfig(newMemFS())
			cfg.Now, cfg.SegmentMs, cfg.SegmentJitterMs = clk.Now, 1000, jitter
			l := mustOpen(t, t.TempDir(), cfg)
			mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, 0, []kv{{[]byte("k"), []byte("v")}}))
			clk.Advance(600)
			mustAppend(t, l, keyedBatch(t, CompressionNone, 0, -1, -1, -1, 0, []kv{{[]byte("k"), []byte("v")}}))
			if l.NumSegments() > 1 {
				n++
			}
			l.Close()
		}
		return n
	}
	if n := rolledEarly(0); n != 0 {
		t.Fatalf("without jitter %d of 40 segments rolled 600 ms into a segment.ms of 1000", n)
	}
	// Each rolls when its jitter exceeds 400 ms: 60% of them.
	if n := rolledEarly(1000); n == 0 || n == 40 {
		t.Fatalf("with a jitter of 1000 ms %d of 40 segments rolled 600 ms into a segment.ms of 1000", n)
	}
}
