package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
)

// TestFetchBudget pins KIP-74's sequential budget: partitions in request
// order, the first partition with data may exceed its limit by one whole
// batch, every later read is strict, and every partition is answered.
func TestFetchBudget(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "budget", 3, nil)
	// Each partition holds three batches; their sizes are measured
	// rather than assumed so the cases read in batches.
	batch := logtest.Batch{Records: 4, ValueSize: 200}
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 3; i++ {
			produceBatch(t, b, "budget", p, batch)
		}
	}
	one := len(batch.Encode())

	cases := []struct {
		name      string
		maxBytes  int32
		partMax   []int32 // per partition, request order 0,1,2
		order     []int32
		wantBytes []int // bytes returned per partition in request order
	}{
		{"all fit", 100 * int32(one), []int32{10 * int32(one), 10 * int32(one), 10 * int32(one)}, []int32{0, 1, 2}, []int{3 * one, 3 * one, 3 * one}},
		{"partition limit below one batch: first gets one batch, others strict nothing", 100 * int32(one), []int32{1, 1, 1}, []int32{0, 1, 2}, []int{one, 0, 0}},
		{"response limit below one batch", 1, []int32{10 * int32(one), 10 * int32(one), 10 * int32(one)}, []int32{0, 1, 2}, []int{one, 0, 0}},
		{"response limit shared in order", int32(4 * one), []int32{10 * int32(one), 10 * int32(one), 10 * int32(one)}, []int32{0, 1, 2}, []int{3 * one, one, 0}},
		{"request order decides who reads first", int32(4 * one), []int32{10 * int32(one), 10 * int32(one), 10 * int32(one)}, []int32{2, 0, 1}, []int{3 * one, one, 0}},
		{"partition limit of two and a half batches", 100 * int32(one), []int32{int32(2*one + one/2), int32(2*one + one/2), int32(2*one + one/2)}, []int32{0, 1, 2}, []int{2 * one, 2 * one, 2 * one}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &FetchRequest{MaxBytes: tc.maxBytes}
			for i, p := range tc.order {
				req.Partitions = append(req.Partitions, FetchPartition{Topic: tp, Partition: p, MaxBytes: tc.partMax[i], LeaderEpoch: -1})
			}
			out := make([]FetchResult, len(req.Partitions))
			b.Fetch(context.Background(), req, out)
			for i, r := range out {
				if r.Err != nil {
					t.Fatalf("partition %d: %v", tc.order[i], r.Err)
				}
				if len(r.Records) != tc.wantBytes[i] {
					t.Errorf("partition %d (position %d): %d bytes, want %d", tc.order[i], i, len(r.Records), tc.wantBytes[i])
				}
				if r.HighWatermark != 12 || r.LogStartOffset != 0 || r.LastStableOffset != 12 {
					t.Errorf("partition %d: hwm %d lso %d start %d", tc.order[i], r.HighWatermark, r.LastStableOffset, r.LogStartOffset)
				}
				if _, err := log.ValidateBatches(r.Records); len(r.Records) > 0 && err != nil {
					t.Errorf("partition %d: returned bytes are not whole batches: %v", tc.order[i], err)
				}
			}
		})
	}
}

// TestFetchFirstBatchLargerThanEveryLimit: a consumer always progresses.
func TestFetchFirstBatchLargerThanEveryLimit(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "big", 2, nil)
	big := logtest.Batch{Records: 2, ValueSize: 64 << 10}
	produceBatch(t, b, "big", 0, logtest.Batch{Records: 1})
	produceBatch(t, b, "big", 1, big)
	// Partition 0 is asked beyond its end (no data); partition 1's only
	// batch is far above both limits and still comes back whole.
	req := &FetchRequest{MaxBytes: 100, Partitions: []FetchPartition{
		{Topic: tp, Partition: 0, Offset: 1, MaxBytes: 100, LeaderEpoch: -1},
		{Topic: tp, Partition: 1, Offset: 0, MaxBytes: 100, LeaderEpoch: -1},
	}}
	out := make([]FetchResult, 2)
	b.Fetch(context.Background(), req, out)
	if len(out[0].Records) != 0 || out[0].Err != nil {
		t.Fatalf("partition 0: %d bytes, err %v", len(out[0].Records), out[0].Err)
	}
	if len(out[1].Records) != len(big.Encode()) {
		t.Fatalf("partition 1: %d bytes, want the whole %d-byte batch", len(out[1].Records), len(big.Encode()))
	}
}

func TestFetchErrors(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "errs", 1, nil)
	produceBatch(t, b, "errs", 0, logtest.Batch{Records: 3})
	cases := []struct {
		name string
		fp   FetchPartition
		want *kerr.Error
	}{
		{"beyond end", FetchPartition{Topic: tp, Partition: 0, Offset: 4, MaxBytes: 1000, LeaderEpoch: -1}, kerr.OffsetOutOfRange},
		{"negative offset", FetchPartition{Topic: tp, Partition: 0, Offset: -1, MaxBytes: 1000, LeaderEpoch: -1}, kerr.OffsetOutOfRange},
		{"unknown partition", FetchPartition{Topic: tp, Partition: 5, MaxBytes: 1000, LeaderEpoch: -1}, kerr.UnknownTopicOrPartition},
		{"unknown topic id", FetchPartition{UnknownErr: kerr.UnknownTopicID, MaxBytes: 1000}, kerr.UnknownTopicID},
		{"newer leader epoch", FetchPartition{Topic: tp, Partition: 0, MaxBytes: 1000, LeaderEpoch: 3}, kerr.UnknownLeaderEpoch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]FetchResult, 1)
			start := time.Now()
			b.Fetch(context.Background(), &FetchRequest{MaxBytes: 1 << 20, MinBytes: 1, MaxWait: 10 * time.Second, Partitions: []FetchPartition{tc.fp}}, out)
			wantCode(t, out[0].Err, tc.want)
			if time.Since(start) > 5*time.Second {
				t.Fatalf("an error must answer at once, not after max wait")
			}
		})
	}
}

// TestFetchLongPollWokenByAppend: a fetch at the end waits, and an append
// wakes it before max wait.
func TestFetchLongPollWokenByAppend(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "poll", 2, nil)
	done := make(chan []FetchResult, 1)
	go func() {
		out := make([]FetchResult, 2)
		b.Fetch(context.Background(), &FetchRequest{MaxBytes: 1 << 20, MinBytes: 1, MaxWait: time.Minute, Partitions: []FetchPartition{
			{Topic: tp, Partition: 0, MaxBytes: 1 << 20, LeaderEpoch: -1},
			{Topic: tp, Partition: 1, MaxBytes: 1 << 20, LeaderEpoch: -1},
		}}, out)
		done <- out
	}()
	select {
	case out := <-done:
		t.Fatalf("fetch returned before any data: %+v", out)
	case <-time.After(100 * time.Millisecond):
	}
	produceBatch(t, b, "poll", 1, logtest.Batch{Records: 2})
	select {
	case out := <-done:
		if len(out[1].Records) == 0 || out[1].HighWatermark != 2 {
			t.Fatalf("woken fetch: partition 1 has %d bytes, hwm %d", len(out[1].Records), out[1].HighWatermark)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fetch was not woken by the append")
	}
}

// TestFetchMinBytesCountsWithoutReading: a fetch waiting for min_bytes
// counts what appends bring (as Kafka's DelayedFetch does) and reads
// again only once they may reach it, then answers with all of it.
func TestFetchMinBytesCountsWithoutReading(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "minbytes", 1, nil)
	small := logtest.Batch{Records: 1, ValueSize: 100}
	size := len(small.Encode())
	done := make(chan FetchResult, 1)
	go func() {
		out := make([]FetchResult, 1)
		b.Fetch(context.Background(), &FetchRequest{MaxBytes: 1 << 20, MinBytes: int32(3 * size), MaxWait: time.Minute,
			Partitions: []FetchPartition{{Topic: tp, Partition: 0, MaxBytes: 1 << 20, LeaderEpoch: -1}}}, out)
		done <- out[0]
	}()
	time.Sleep(100 * time.Millisecond) // the fetch is waiting
	reads0, _ := b.LogReadStats()
	for range 2 {
		produceBatch(t, b, "minbytes", 0, small)
	}
	select {
	case r := <-done:
		t.Fatalf("answered below min_bytes with %d bytes", len(r.Records))
	case <-time.After(200 * time.Millisecond):
	}
	if reads, _ := b.LogReadStats(); reads != reads0 {
		t.Fatalf("%d log reads while the appends stayed below min_bytes", reads-reads0)
	}
	produceBatch(t, b, "minbytes", 0, small)
	select {
	case r := <-done:
		if len(r.Records) != 3*size || r.HighWatermark != 3 {
			t.Fatalf("answer: %d bytes, hwm %d; want %d, 3", len(r.Records), r.HighWatermark, 3*size)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not answered once min_bytes arrived")
	}
}

func TestFetchMaxWaitExpires(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "wait", 1, nil)
	out := make([]FetchResult, 1)
	b.Fetch(context.Background(), &FetchRequest{MaxBytes: 1 << 20, MinBytes: 1, MaxWait: 50 * time.Millisecond,
		Partitions: []FetchPartition{{Topic: tp, Partition: 0, MaxBytes: 1 << 20, LeaderEpoch: -1}}}, out)
	if out[0].Err != nil || len(out[0].Records) != 0 || out[0].HighWatermark != 0 {
		t.Fatalf("empty fetch after max wait: %+v", out[0])
	}
}

func BenchmarkFetchPlanner(b *testing.B) {
	br := openTestBroker(b, b.TempDir())
	tp := mustCreate(b, br, "bench", 4, nil)
	for p := int32(0); p < 4; p++ {
		for i := 0; i < 64; i++ {
			produceBatch(b, br, "bench", p, logtest.Batch{Records: 16, ValueSize: 1000})
		}
	}
	req := &FetchRequest{MaxBytes: 4 << 20}
	for p := int32(0); p < 4; p++ {
		req.Partitions = append(req.Partitions, FetchPartition{Topic: tp, Partition: p, MaxBytes: 1 << 20, LeaderEpoch: -1})
	}
	out := make([]FetchResult, 4)
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for i := 0; i < b.N; i++ {
		br.Fetch(context.Background(), req, out)
		n = 0
		for _, r := range out {
			n += len(r.Records)
		}
	}
	b.SetBytes(int64(n))
}

// TestWaitersWokenAtTheirThreshold: an append wakes only the fetches it
// brought to their threshold; other changes wake every one.
func TestWaitersWokenAtTheirThreshold(t *testing.T) {
	p := newPartition(nil, 0, "")
	soon, later := make(chan struct{}, 1), make(chan struct{}, 1)
	p.addWaiter(soon, 100)
	p.addWaiter(later, 1000)
	signalled := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	p.wakeAt(99)
	if signalled(soon) || signalled(later) {
		t.Fatal("woken below every threshold")
	}
	p.wakeAt(500)
	if !signalled(soon) || signalled(later) {
		t.Fatal("500 appended bytes should wake the waiter at 100 only")
	}
	p.wake()
	if !signalled(soon) || !signalled(later) {
		t.Fatal("wake must signal every waiter")
	}
	p.removeWaiter(soon)
	p.wakeAt(5000)
	if signalled(soon) || !signalled(later) {
		t.Fatal("a removed waiter was signalled, or a due one was not")
	}
}
