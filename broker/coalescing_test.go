package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/weir-broker/weir/coalescer"
	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
)

func TestFreshUntil(t *testing.T) {
	batch := logtest.Batch{Records: 3, ValueSize: 10}.Encode() // offsets 10-12
	binary.BigEndian.PutUint64(batch, 10)
	for _, tc := range []struct {
		name string
		data []byte
		upTo int64
		want int64
	}{
		{"reached the watermark: outgrown by the next record", batch, 13, 13},
		{"stopped short of it: the same bytes whatever comes", batch, 20, math.MaxInt64},
		{"empty: bounded by the watermark", nil, 13, 13},
	} {
		if got := freshUntil(tc.data, tc.upTo); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestRangeHitIsWhatAReadReturns: consumers at different offsets of the
// same partition, while an earlier fetch's read is held, get that read's
// bytes from their offset on, byte for byte what reading returns, without
// a read of their own.
func TestRangeHitIsWhatAReadReturns(t *testing.T) {
	b := openBudgetBroker(t, 64<<20)
	if err := b.AlterClusterProperties([]PropertyChange{{Name: coalescingProperty, Value: "true"}}, false); err != nil {
		t.Fatal(err)
	}
	tp := mustCreate(t, b, "range", 1, nil)
	for range 8 {
		produceBatch(t, b, "range", 0, logtest.Batch{Records: 5, ValueSize: 200}) // offsets 0-39
	}
	fetch := func(offset int64, maxBytes int32) FetchResult {
		out := make([]FetchResult, 1)
		b.Fetch(context.Background(), &FetchRequest{MaxBytes: 1 << 20, MinBytes: 1, Partitions: []FetchPartition{
			{Topic: tp, Partition: 0, Offset: offset, MaxBytes: maxBytes, LeaderEpoch: -1}}}, out)
		return out[0]
	}
	held := fetch(0, 1<<20) // every batch, up to the high watermark
	defer held.Release()
	p, err := tp.LeaderPartition(0, -1)
	if err != nil {
		t.Fatal(err)
	}
	readsBefore := coalescer.SumStats(b.CoalescerStats()).Reads
	for _, tc := range []struct {
		offset   int64
		maxBytes int32
	}{{5, 1 << 20}, {12, 1 << 20}, {20, 3000}, {39, 1}} {
		got := fetch(tc.offset, tc.maxBytes)
		want, err := p.log.Read(tc.offset, int(tc.maxBytes), log.Obligatory, p.HighWatermark())
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || !bytes.Equal(got.Records, want) {
			t.Fatalf("fetch at %d, max %d: %d bytes, a read returns %d", tc.offset, tc.maxBytes, len(got.Records), len(want))
		}
		got.Release()
	}
	st := coalescer.SumStats(b.CoalescerStats())
	if st.RangeHits != 4 || st.Reads != readsBefore {
		t.Fatalf("stats %+v: want 4 range hits and no read after the first fetch's", st)
	}
}
