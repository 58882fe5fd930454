package log

import (
	"fmt"
	"testing"
)

func TestOffsetForTimestamp(t *testing.T) {
	codecs := []int8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	for _, codec := range codecs {
		t.Run(fmt.Sprint("codec", codec), func(t *testing.T) {
			cfg := testConfig(nil)
			cfg.SegmentBytes = 400
			cfg.IndexIntervalBytes = 1
			l := mustOpen(t, t.TempDir(), cfg)
			defer l.Close()
			if _, _, ok, err := l.OffsetForTimestamp(0); ok || err != nil {
				t.Fatalf("empty log: ok %v err %v", ok, err)
			}
			if _, _, ok, _ := l.MaxTimestamp(); ok {
				t.Fatal("MaxTimestamp ok on empty log")
			}
			// offsets 0-2: ts 100,110,105
			mustAppend(t, l, encodeBatch(t, CompressionNone, testRecord{100, nil}, testRecord{110, nil}, testRecord{105, nil}))
			// offsets 3-6: ts 200, 150, 250, 250 (compressed)
			mustAppend(t, l, encodeBatch(t, codec, testRecord{200, []byte("x")}, testRecord{150, []byte("y")},
				testRecord{250, []byte("z")}, testRecord{250, []byte("w")}))
			// offsets 7-8: out-of-order timestamps after the max
			mustAppend(t, l, encodeBatch(t, CompressionNone, testRecord{120, nil}, testRecord{240, nil}))
			// offsets 9-10: LogAppendTime batch stamped 300
			if _, err := l.Append(encodeBatch(t, CompressionNone, testRecord{1, nil}, testRecord{2, nil}),
				AppendOptions{LogAppendTime: 300}); err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				ts, off, gotTs int64
				ok             bool
			}{
				{0, 0, 100, true},
				{100, 0, 100, true},
				{101, 1, 110, true},
				{111, 3, 200, true},
				{201, 5, 250, true},
				{250, 5, 250, true},
				{251, 9, 300, true},
				{300, 9, 300, true},
				{301, 0, 0, false},
			}
			for _, c := range cases {
				off, ts, ok, err := l.OffsetForTimestamp(c.ts)
				if err != nil {
					t.Fatalf("ts %d: %v", c.ts, err)
				}
				if ok != c.ok || (ok && (off != c.off || ts != c.gotTs)) {
					t.Errorf("OffsetForTimestamp(%d) = (%d,%d,%v), want (%d,%d,%v)", c.ts, off, ts, ok, c.off, c.gotTs, c.ok)
				}
			}
			off, ts, ok, err := l.MaxTimestamp()
			if err != nil || !ok || off != 9 || ts != 300 {
				t.Fatalf("MaxTimestamp = (%d,%d,%v,%v), want (9,300)", off, ts, ok, err)
			}
			// Records below the log start are skipped.
			if err := l.DeleteRecordsBefore(4); err != nil {
				t.Fatal(err)
			}
			if off, _, _, _ := l.OffsetForTimestamp(0); off != 4 {
				t.Errorf("after DeleteRecords: OffsetForTimestamp(0) = %d, want 4", off)
			}
		})
	}
}

func TestMaxTimestampFirstAmongTies(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 200
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	mustAppend(t, l, encodeBatch(t, CompressionNone, testRecord{10, nil}, testRecord{50, nil})) // 0-1
	mustAppend(t, l, encodeBatch(t, CompressionGzip, testRecord{20, nil}, testRecord{70, nil}, testRecord{70, nil}))
	mustAppend(t, l, encodeBatch(t, CompressionNone, testRecord{70, nil})) // 5, tie, later
	mustAppend(t, l, encodeBatch(t, CompressionNone, testRecord{60, nil}))
	off, ts, ok, err := l.MaxTimestamp()
	if err != nil || !ok || off != 3 || ts != 70 {
		t.Fatalf("MaxTimestamp = (%d,%d,%v,%v), want (3,70)", off, ts, ok, err)
	}
	if l.NumSegments() < 2 {
		t.Fatalf("test wants several segments, got %d", l.NumSegments())
	}
}
