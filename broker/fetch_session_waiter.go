package broker

import "sync"

// SessionWaiter keeps a fetch session's (KIP-227) wake-up registered with
// the session's partitions between its fetches. An idle consumer of many
// partitions long-polls all of them on every fetch; registering and
// removing a waiter on each partition each time would cost more than the
// fetch's reads. With a SessionWaiter a fetch registers only partitions
// new to the session and drops only those the session no longer reads.
//
// It wakes on every append to a registered partition, whether a fetch is
// waiting or not: a waiting fetch counts what arrived since its read
// (arrivedSince) and goes back to waiting if that is not enough, so a
// stale wake-up costs one check.
type SessionWaiter struct {
	wake chan struct{}

	mu     sync.Mutex
	closed bool
	gen    uint64
	parts  map[*Partition]uint64 // generation of the last fetch that read it
	seq    []*Partition          // what the last fetch read, in order
}

// NewSessionWaiter returns a waiter registered with no partition.
func NewSessionWaiter() *SessionWaiter {
	return &SessionWaiter{wake: make(chan struct{}, 1), parts: map[*Partition]uint64{}}
}

// register makes the waiter registered with exactly the partitions the
// fetch just read (out), and empties its channel. It reports false once
// the waiter is closed: the fetch then registers a waiter of its own.
//
// An idle session reads the same partitions in the same order fetch
// after fetch: that is checked by comparing pointers, and only a change
// (a partition added, forgotten, moved in the order, or replaced by a new
// replica) costs a map update per partition.
func (sw *SessionWaiter) register(out []FetchResult) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		return false
	}
	same := len(sw.seq) == len(out)
	for i := 0; same && i < len(out); i++ {
		same = sw.seq[i] == out[i].part
	}
	if !same {
		sw.update(out)
	}
	// What arrived before now is counted by the caller, not waited for.
	select {
	case <-sw.wake:
	default:
	}
	return true
}

func (sw *SessionWaiter) update(out []FetchResult) {
	sw.gen++
	sw.seq = sw.seq[:0]
	n := 0
	for i := range out {
		p := out[i].part
		sw.seq = append(sw.seq, p)
		if p == nil {
			continue
		}
		if _, ok := sw.parts[p]; !ok {
			p.addWaiter(sw.wake, 0)
		}
		if sw.parts[p] != sw.gen {
			sw.parts[p] = sw.gen
			n++
		}
	}
	if len(sw.parts) > n {
		// Forgotten partitions, and replicas replaced by new ones.
		for p, g := range sw.parts {
			if g != sw.gen {
				p.removeWaiter(sw.wake)
				delete(sw.parts, p)
			}
		}
	}
}

// Release removes the waiter from every partition while its session is
// idle, so that appends do not keep signalling a session nobody fetches
// with; the session's next long poll registers it again.
func (sw *SessionWaiter) Release() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for p := range sw.parts {
		p.removeWaiter(sw.wake)
	}
	clear(sw.parts)
	sw.seq = sw.seq[:0]
}

// Close removes the waiter from every partition; the session is gone.
func (sw *SessionWaiter) Close() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.closed = true
	for p := range sw.parts {
		p.removeWaiter(sw.wake)
	}
	clear(sw.parts)
	sw.seq = nil
}

// Registered is how many partitions the waiter is registered with.
func (sw *SessionWaiter) Registered() int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return len(sw.parts)
}
