package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/raft"
)

// fakeApplied plays the partition's apply for leaderWrites: the applied
// index and the log end it left.
type fakeApplied struct {
	index uint64
	end   int64
}

func newTestWrites(a *fakeApplied) *leaderWrites {
	return &leaderWrites{
		applied:  func() (uint64, int64) { return a.index, a.end },
		logStart: func() int64 { return 3 },
	}
}

func entryOf(n int) []byte { return make([]byte, entryHeaderLen+n) }

func command(index uint64, data []byte) raft.StoredEntry {
	return raft.StoredEntry{Index: index, Term: 2, Command: true, Data: data}
}

func noop(index uint64) raft.StoredEntry { return raft.StoredEntry{Index: index, Term: 2} }

// answered reports lw's early answer, if it has one.
func answered(lw *leaderWrite) (AppendResult, bool) {
	select {
	case <-lw.ready:
		return lw.result, true
	default:
		return AppendResult{}, false
	}
}

func wantAnswer(t *testing.T, what string, lw *leaderWrite, base int64) {
	t.Helper()
	res, ok := answered(lw)
	switch {
	case !ok:
		t.Fatalf("%s: not answered, want base offset %d", what, base)
	case res.BaseOffset != base || res.LogStartOffset != 3:
		t.Fatalf("%s: answered %+v, want base offset %d, log start 3", what, res, base)
	}
}

func wantNoAnswer(t *testing.T, what string, lw *leaderWrite) {
	t.Helper()
	if res, ok := answered(lw); ok {
		t.Fatalf("%s: answered %+v, want no early answer", what, res)
	}
}

// The prediction follows the log from an applied point through the
// registered batches and entries without commands, and stops at anything
// else until the apply catches up with it.
func TestLeaderWritesPredictsOffsets(t *testing.T) {
	a := &fakeApplied{}
	w := newTestWrites(a)

	// A group that stored no command since it started cannot know that
	// its log is applied up to here (commands replayed at start).
	e1 := entryOf(10)
	lw1 := w.register(e1, 4, 0)
	w.Stored(noop(1))
	w.Stored(command(2, e1))
	wantNoAnswer(t, "first command since start", lw1)
	w.forget(lw1)
	a.index, a.end = 2, 4

	// Applied up to the last command: predicted from the log end, on
	// through a no-op and consecutive registered batches.
	e3, e5, e6 := entryOf(10), entryOf(20), entryOf(30)
	lw3, lw5 := w.register(e3, 5, 0), w.register(e5, 2, 1700000000000)
	w.Stored(command(3, e3))
	w.Stored(noop(4))
	w.Stored(command(5, e5))
	wantAnswer(t, "batch after the applied point", lw3, 4)
	wantAnswer(t, "batch after a no-op", lw5, 9)
	if got := lw5.result.LogAppendTime; got != 1700000000000 {
		t.Fatalf("LogAppendTime %d, want the entry's", got)
	}
	if got := lw3.result.LogAppendTime; got != -1 {
		t.Fatalf("CreateTime batch answered with LogAppendTime %d, want -1", got)
	}

	// An entry nobody registered (an idempotent batch, a marker) stops
	// the prediction, and it resumes only once that entry is applied.
	e7 := entryOf(10)
	w.Stored(command(6, e6))
	lw7 := w.register(e7, 1, 0)
	w.Stored(command(7, e7))
	wantNoAnswer(t, "batch after an unregistered entry", lw7)
	w.forget(lw7)
	a.index, a.end = 7, 20
	e8 := entryOf(10)
	lw8 := w.register(e8, 1, 0)
	w.Stored(command(8, e8))
	wantAnswer(t, "batch once the log is applied", lw8, 20)

	// An entry out of sequence starts the prediction over, which needs
	// the log applied up to the last command stored.
	e10 := entryOf(10)
	lw10 := w.register(e10, 1, 0)
	w.Stored(command(10, e10))
	wantNoAnswer(t, "batch after a gap", lw10)
	w.forget(lw10)

	// So does a truncation reaching the last command.
	a.index, a.end = 10, 30
	e11 := entryOf(10)
	w.Stored(command(11, e11)) // nobody waits: only the last command is kept
	a.index, a.end = 11, 31
	w.Truncated(11, 11)
	e12 := entryOf(10)
	lw12 := w.register(e12, 1, 0)
	w.Stored(command(11, e12))
	wantNoAnswer(t, "batch after a truncation", lw12)
	w.forget(lw12)
	if n := w.waiting.Load(); n != 0 {
		t.Fatalf("%d writes still counted as waiting", n)
	}
	if len(w.byData) != 0 {
		t.Fatalf("%d registrations left", len(w.byData))
	}
}

// While nothing is registered the observer takes no lock and keeps only
// the index of the last command.
func TestLeaderWritesIdle(t *testing.T) {
	a := &fakeApplied{}
	w := newTestWrites(a)
	for i := uint64(1); i <= 100; i++ {
		w.Stored(command(i, entryOf(1)))
	}
	if got := w.lastCommand.Load(); got != 100 {
		t.Fatalf("last command %d, want 100", got)
	}
	if w.byData != nil || w.through != 0 {
		t.Fatalf("idle observer built state: %d registrations, through %d", len(w.byData), w.through)
	}
	a.index, a.end = 100, 500
	e := entryOf(1)
	lw := w.register(e, 7, 0)
	w.Stored(command(101, e))
	wantAnswer(t, "first registered batch after idling", lw, 500)
}

// acks=1 batches produced concurrently with acks=all ones (which stop
// the prediction) each read back at the offset they were answered with;
// under -race this is also the observer against the apply. Half the
// producers learn their outcomes through Then, the other half through Wait.
func TestProduceAcksOneOffsets(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	b.acksOneSolo = true // one broker: its sole replicas answer at commit otherwise
	p := mustCreate(t, b, "acks1", 1, nil).Partition(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const producers, batches, perBatch = 4, 100, 3
	var mu sync.Mutex
	var thenCalls atomic.Int64
	offsetOf := map[string]int64{}
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acks := int16(1)
			if g == producers-1 {
				acks = -1
			}
			for i := range batches {
				var kvs []log.KeyValue
				for r := range perBatch {
					kvs = append(kvs, log.KeyValue{Key: fmt.Appendf(nil, "%d-%d-%d", g, i, r)})
				}
				pa, err := b.StartProduce(ctx, "acks1", 0, log.BuildBatch(time.Now().UnixMilli(), kvs), ProduceOptions{Acks: acks})
				if err != nil {
					errs <- err
					return
				}
				res, err := outcomeOf(ctx, pa, g%2 == 1, &thenCalls)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for r, kv := range kvs {
					offsetOf[string(kv.Key)] = res.BaseOffset + int64(r)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	read := 0
	forEachLogRecord(t, p, func(r log.Record) {
		read++
		if want, ok := offsetOf[string(r.Key)]; !ok || want != r.Offset {
			t.Errorf("record %s at offset %d was answered with offset %d (answered: %v)", r.Key, r.Offset, want, ok)
		}
	})
	if read != producers*batches*perBatch {
		t.Fatalf("read %d records, want %d", read, producers*batches*perBatch)
	}
	if got, want := thenCalls.Load(), int64(producers/2*batches); got != want {
		t.Errorf("Then called %d times for %d batches", got, want)
	}
	early, commit := b.acksOne.leaderLog.Load(), b.acksOne.commit.Load()
	if early+commit != (producers-1)*batches || early == 0 {
		t.Fatalf("acks=1 batches answered from the leader's log %d, at commit %d; want %d in all, some early", early, commit, (producers-1)*batches)
	}
	t.Logf("acks=1 batches answered from the leader's log: %d, at their commit: %d", early, commit)
}

// outcomeOf is pa's outcome through Wait, or through Then when then is
// set, counting Then's calls.
func outcomeOf(ctx context.Context, pa PendingAppend, then bool, calls *atomic.Int64) (AppendResult, error) {
	if !then {
		return pa.Wait(ctx)
	}
	type outcome struct {
		res AppendResult
		err error
	}
	ch := make(chan outcome, 2)
	pa.Then(func(res AppendResult, err error) {
		calls.Add(1)
		ch <- outcome{res, err}
	})
	select {
	case o := <-ch:
		return o.res, o.err
	case <-ctx.Done():
		return AppendResult{}, ctx.Err()
	}
}
