package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
)

func openBudgetBroker(t *testing.T, budget int64) *Broker {
	t.Helper()
	node := testNode(t.TempDir())
	node.FetchMemoryBudgetBytes = budget
	b, err := Open(Options{Node: node, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestFetchBudgetChargedOncePerCoalescedRead: N fetches holding the same
// coalesced read hold its bytes in the budget once; without coalescing
// each holds its own. Every byte comes back on release, or stays charged
// for a buffer kept for reuse.
func TestFetchBudgetChargedOncePerCoalescedRead(t *testing.T) {
	for _, coalesce := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalescing=%v", coalesce), func(t *testing.T) {
			b := openBudgetBroker(t, 64<<20)
			if err := b.AlterClusterProperties([]PropertyChange{{Name: coalescingProperty, Value: fmt.Sprint(coalesce)}}, false); err != nil {
				t.Fatal(err)
			}
			tp := mustCreate(t, b, "once", 1, nil)
			for range 4 {
				produceBatch(t, b, "once", 0, logtest.Batch{Records: 16, ValueSize: 1000})
			}
			const n = 16
			outs := make([][]FetchResult, n)
			var wg sync.WaitGroup
			for i := range outs {
				outs[i] = make([]FetchResult, 1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					b.Fetch(context.Background(), &FetchRequest{MaxBytes: 1 << 20, MinBytes: 1, MaxWait: time.Second,
						Partitions: []FetchPartition{{Topic: tp, Partition: 0, MaxBytes: 1 << 20, LeaderEpoch: -1}}}, outs[i])
				}()
			}
			wg.Wait()
			one := int64(cap(outs[0][0].Records))
			if one == 0 {
				t.Fatal("the fetch returned nothing")
			}
			want := one
			if !coalesce {
				want = n * one
			}
			if used := b.FetchMemoryStats().Used; used != want {
				t.Fatalf("%d fetches hold %d bytes of the budget, want %d (one read is %d)", n, used, want, one)
			}
			for _, out := range outs {
				out[0].Release()
			}
			// What is still charged is what was kept for reuse (buffers,
			// and with coalescing the read retained for later fetches),
			// and it goes back when a reader needs the budget.
			held, retained := b.fetchReads.Held(), b.coalescer.RetainedBytes()
			if used := b.FetchMemoryStats().Used; used != held.Held+retained || held.Held > held.MaxHeld {
				t.Fatalf("%d bytes still charged after every release, %d held for reuse (at most %d), %d retained", used, held.Held, held.MaxHeld, retained)
			}
			if coalesce && retained != one {
				t.Fatalf("%d bytes retained, want the one read (%d)", retained, one)
			}
			b.coalescer.Shed(math.MaxInt64)
			b.fetchReads.Lend(math.MaxInt64)
			if used := b.FetchMemoryStats().Used; used != 0 {
				t.Fatalf("%d bytes still charged with no buffer held", used)
			}
		})
	}
}

// TestFetchBudgetShort: while the budget is held, a strict read gets what
// is free (here nothing), and an obligatory read waits briefly and then
// takes its first batch anyway, past the budget, so consumers progress.
func TestFetchBudgetShort(t *testing.T) {
	const budget = 1 << 20
	b := openBudgetBroker(t, budget)
	tp := mustCreate(t, b, "short", 2, nil)
	batch := logtest.Batch{Records: 4, ValueSize: 100 << 10} // ~400 KiB
	for p := int32(0); p < 2; p++ {
		for range 3 {
			produceBatch(t, b, "short", p, batch)
		}
	}
	req := func() *FetchRequest {
		return &FetchRequest{MaxBytes: 8 << 20, MinBytes: 1, MaxWait: time.Second, Partitions: []FetchPartition{
			{Topic: tp, Partition: 0, MaxBytes: 8 << 20, LeaderEpoch: -1},
			{Topic: tp, Partition: 1, MaxBytes: 8 << 20, LeaderEpoch: -1},
		}}
	}
	// Hold most of the budget, as responses stuck on slow sockets would.
	held := b.fetchReads.Budget().TryAcquireUpTo(budget)
	if held != budget {
		t.Fatalf("held %d", held)
	}
	out := make([]FetchResult, 2)
	start := time.Now()
	b.Fetch(context.Background(), req(), out)
	waited := time.Since(start)
	if waited < fetchMemoryWait/2 {
		t.Errorf("an obligatory read on a spent budget answered after %v, without waiting", waited)
	}
	if got, want := len(out[0].Records), len(batch.Encode()); got != want {
		t.Fatalf("partition 0: %d bytes, want exactly its first batch (%d)", got, want)
	}
	if len(out[1].Records) != 0 {
		t.Fatalf("partition 1: %d bytes from a spent budget, want none", len(out[1].Records))
	}
	s := b.FetchMemoryStats()
	if s.Overdraw == 0 || s.Waits == 0 || s.Trimmed == 0 {
		t.Fatalf("stats %+v: want an overdraft, a wait and trimmed reads", s)
	}
	for i := range out {
		out[i].Release()
	}
	b.fetchReads.Budget().Release(held)

	// With the budget free again the response holds what the budget
	// does: two of partition 0's three batches (not three: 1.2 MB), and
	// nothing of partition 1 (what is left is less than a batch).
	b.Fetch(context.Background(), req(), out)
	for p, want := range []int{2 * len(batch.Encode()), 0} {
		if got := len(out[p].Records); got != want {
			t.Fatalf("partition %d: %d bytes with a free 1 MiB budget, want %d", p, got, want)
		}
		out[p].Release()
	}
	if used := b.FetchMemoryStats().Used; used != 0 {
		t.Fatalf("%d bytes still charged", used)
	}
}

// TestReadTakesBuffersKeptForReuse: buffers kept for reuse count against
// the fetch budget, so a read that finds the budget short takes their
// bytes, and the buffer itself, rather than going without.
func TestReadTakesBuffersKeptForReuse(t *testing.T) {
	const budget = 1 << 20
	b := openBudgetBroker(t, budget)
	tp := mustCreate(t, b, "trim", 1, nil)
	produceBatch(t, b, "trim", 0, logtest.Batch{Records: 4, ValueSize: 10 << 10})
	p, err := tp.LeaderPartition(0, -1)
	if err != nil {
		t.Fatal(err)
	}
	// A released response's buffer, kept for reuse.
	kept, err := b.readBudgeted(context.Background(), p, 0, 64<<10, log.Strict, p.HighWatermark())
	if err != nil || len(kept) == 0 {
		t.Fatal(len(kept), err)
	}
	keptAt, keptCap := &kept[:1][0], int64(cap(kept))
	b.fetchReads.Return(kept)
	if held := b.fetchReads.Held().Held; held != keptCap {
		t.Fatalf("held %d, want the returned buffer (%d)", held, keptCap)
	}
	others := b.fetchReads.Budget().TryAcquireUpTo(budget) // every other byte in use
	defer b.fetchReads.Budget().Release(others)

	data, err := b.readBudgeted(context.Background(), p, 0, 64<<10, log.Strict, p.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		t.Fatal("a strict read got nothing while the budget's only free bytes were buffers kept for reuse")
	}
	if held := b.fetchReads.Held().Held; held != 0 {
		t.Fatalf("%d bytes still kept for reuse", held)
	}
	if &data[:1][0] != keptAt {
		t.Fatal("the read allocated a new buffer instead of taking the one kept for reuse")
	}
	b.fetchReads.Return(data)
}

// TestFetchBuffersReturnedOnce counts every read buffer from the read
// that charged it to the one Return that gives it back, through what can
// happen to a fetch in between: coalescing on, off and switched while
// fetches run (results shared by several fetches, retained for later
// ones, shed when the budget runs short), a budget smaller than what the
// fetches ask for (strict reads trimmed or empty, obligatory ones waiting
// and overdrawing), and fetches abandoned mid-wait as when their
// connection dies. Once every result is released nothing is outstanding
// and the budget holds exactly the buffers kept for reuse; a leak, or a
// buffer given back twice, fails it.
func TestFetchBuffersReturnedOnce(t *testing.T) {
	const budget = 512 << 10
	b := openBudgetBroker(t, budget)
	tp := mustCreate(t, b, "owned", 3, nil)
	batch := logtest.Batch{Records: 8, ValueSize: 4 << 10} // ~32 KiB
	for p := int32(0); p < 3; p++ {
		for range 4 {
			produceBatch(t, b, "owned", p, batch)
		}
	}
	setCoalescing := func(on bool) {
		if err := b.AlterClusterProperties([]PropertyChange{{Name: coalescingProperty, Value: fmt.Sprint(on)}}, false); err != nil {
			t.Error(err)
		}
	}
	setCoalescing(true)

	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	var wg sync.WaitGroup
	// Producers keep waking the long polls. What they write is not what
	// the test checks: on a loaded machine a produce may time out, and
	// the fetches go on without it.
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = b.Produce(ctx, "owned", int32(i%3), batch.Encode(), ProduceOptions{})
			time.Sleep(5 * time.Millisecond)
		}
	})
	// Coalescing is switched while fetches run.
	wg.Go(func() {
		for on := false; ctx.Err() == nil; on = !on {
			setCoalescing(on)
			time.Sleep(50 * time.Millisecond)
		}
	})
	fetches := 0
	var fetchesMu sync.Mutex
	for c := range 12 {
		wg.Go(func() {
			out := make([]FetchResult, 3)
			for i := 0; ctx.Err() == nil; i++ {
				// Every consumer asks from the same few offsets, so that
				// coalesced reads are shared and retained.
				offset := int64((c + i) % 4 * batch.Records)
				req := &FetchRequest{MaxBytes: 256 << 10, MinBytes: 1, MaxWait: 200 * time.Millisecond}
				if i%3 == 0 {
					req.MinBytes = 64 << 20 // a long poll that only a deadline ends
				}
				for p := int32(0); p < 3; p++ {
					req.Partitions = append(req.Partitions, FetchPartition{Topic: tp, Partition: p, Offset: offset, MaxBytes: 128 << 10, LeaderEpoch: -1})
				}
				fctx, cancel := context.WithCancel(ctx)
				if i%4 == 1 {
					// The connection dies while the fetch waits.
					time.AfterFunc(time.Duration(i%7)*10*time.Millisecond, cancel)
				}
				b.Fetch(fctx, req, out)
				cancel()
				for k := range out {
					out[k].Release()
				}
				fetchesMu.Lock()
				fetches++
				fetchesMu.Unlock()
			}
		})
	}
	wg.Wait()

	if fetches < 12 {
		t.Fatalf("only %d fetches ran", fetches)
	}
	// Coalescing may have been left on, holding a retained result (one
	// small enough for the retention bound): switching it off lets every
	// retained read go, and only then is every buffer back.
	setCoalescing(false)
	for deadline := time.Now().Add(10 * time.Second); b.coalescer.Enabled(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("coalescing still on 10 s after it was switched off")
		}
	}
	if out := b.fetchReads.Outstanding(); out != 0 {
		t.Fatalf("%d read buffers outstanding after every result was released after %d fetches (negative: given back twice)", out, fetches)
	}
	held := b.fetchReads.Held()
	if used := b.FetchMemoryStats().Used; used != held.Held {
		t.Fatalf("%d bytes charged with nothing in use, %d held for reuse", used, held.Held)
	}
	s := b.FetchMemoryStats()
	if s.Trimmed == 0 {
		t.Errorf("no read was trimmed by the budget (%+v): the test did not exhaust it", s)
	}
	var hits uint64
	for _, sh := range b.coalescer.Stats() {
		hits += sh.ReadyHits + sh.InflightHits
	}
	if hits == 0 {
		t.Error("no fetch shared a coalesced read: the test did not exercise sharing")
	}
}
