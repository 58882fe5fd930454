package broker

import (
	"context"
	"testing"
	"time"

	"github.com/weir-broker/weir/log/logtest"
)

// waitersOf counts the waiting fetches registered with partition i.
func waitersOf(t *testing.T, tp *Topic, i int32) int {
	t.Helper()
	p, err := tp.LocalPartition(i)
	if err != nil {
		t.Fatal(err)
	}
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	return len(p.waiters)
}

// TestSessionWaiter: a fetch session's waiter stays registered with its
// partitions between long polls, wakes a poll on an append to any of
// them, follows the session's partitions as they change, and leaves every
// partition when closed.
func TestSessionWaiter(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "sw", 3, nil)
	sw := NewSessionWaiter()
	req := &FetchRequest{MaxBytes: 1 << 20, MinBytes: 1, MaxWait: 50 * time.Millisecond, Waiter: sw}
	for p := range int32(3) {
		req.Partitions = append(req.Partitions, FetchPartition{Topic: tp, Partition: p, MaxBytes: 1 << 20, LeaderEpoch: -1})
	}
	out := make([]FetchResult, 3)
	poll := func() {
		b.Fetch(context.Background(), req, out)
		for i := range out {
			out[i].Release()
		}
	}
	// Nothing to read: the poll times out, the waiter stays.
	poll()
	if n := sw.Registered(); n != 3 {
		t.Fatalf("registered with %d partitions after a poll, want 3", n)
	}
	for p := range int32(3) {
		if n := waitersOf(t, tp, p); n != 1 {
			t.Fatalf("partition %d has %d waiters, want 1", p, n)
		}
	}
	// An append to partition 2 ends a long poll.
	req.MaxWait = 30 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Fetch(context.Background(), req, out)
	}()
	time.Sleep(50 * time.Millisecond)
	produceBatch(t, b, "sw", 2, logtest.Batch{Records: 1, ValueSize: 10})
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the append did not end the long poll")
	}
	if len(out[2].Records) == 0 {
		t.Fatal("the woken poll returned no records of partition 2")
	}
	for i := range out {
		out[i].Release()
	}
	// The session drops partition 0: so does the waiter, at its next poll.
	req.Partitions = req.Partitions[1:]
	req.Partitions[1].Offset = 1
	req.MaxWait = 20 * time.Millisecond
	out = out[:2]
	poll()
	if n := waitersOf(t, tp, 0); n != 0 || sw.Registered() != 2 {
		t.Fatalf("after partition 0 left: %d waiters on it, registered with %d", n, sw.Registered())
	}
	sw.Close()
	for p := range int32(3) {
		if n := waitersOf(t, tp, p); n != 0 {
			t.Fatalf("partition %d has %d waiters after Close", p, n)
		}
	}
	// Closed, it is not used: a poll registers its own and cleans up.
	poll()
	for p := range int32(3) {
		if n := waitersOf(t, tp, p); n != 0 {
			t.Fatalf("partition %d has %d waiters after a poll with a closed waiter", p, n)
		}
	}
}
