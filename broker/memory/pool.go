package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrLargerThanPool refuses a reservation the pool could never grant.
var ErrLargerThanPool = errors.New("larger than the memory pool")

// Pool is a byte budget; use NewPool. An unbounded pool grants everything
// at once but still counts what is in use.
type Pool struct {
	size      int64
	unbounded bool

	mu       sync.Mutex
	used     int64
	peak     int64
	waiters  []*waiter // FIFO
	waits    int64     // reservations that had to wait
	waited   time.Duration
	trimmed  int64 // reservations granted less than asked (TryAcquireUpTo)
	overdraw int64 // bytes charged past the size
}

type waiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are reserved for it
}

// NewPool returns a pool of size bytes; size <= 0 means unbounded.
func NewPool(size int64) *Pool {
	if size <= 0 {
		return &Pool{size: math.MaxInt64, unbounded: true}
	}
	return &Pool{size: size}
}

// Size is the pool's size, 0 for an unbounded pool.
func (p *Pool) Size() int64 {
	if p.unbounded {
		return 0
	}
	return p.size
}

// Acquire reserves n bytes, waiting (until ctx ends) while the pool is
// spent. A reservation larger than the whole pool is refused at once.
func (p *Pool) Acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	if n > p.size {
		return fmt.Errorf("%w: %d bytes, the pool holds %d", ErrLargerThanPool, n, p.size)
	}
	p.mu.Lock()
	if len(p.waiters) == 0 && p.used+n <= p.size {
		p.addLocked(n)
		p.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.waits++
	p.mu.Unlock()

	start := time.Now()
	defer func() {
		p.mu.Lock()
		p.waited += time.Since(start)
		p.mu.Unlock()
	}()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		select {
		case <-w.ready:
			// Granted meanwhile: hand the bytes back.
			p.releaseLocked(n)
		default:
			p.removeWaiterLocked(w)
			// Removing the head may let the next ones in.
			p.grantLocked()
		}
		return ctx.Err()
	}
}

// TryAcquireUpTo reserves up to n bytes without waiting: n when they are
// free, else what is free (possibly 0). It does not overtake waiters.
func (p *Pool) TryAcquireUpTo(n int64) int64 {
	if n <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiters) > 0 {
		p.trimmed++
		return 0
	}
	got := min(n, p.size-p.used)
	if got < n {
		p.trimmed++
	}
	if got <= 0 {
		return 0
	}
	p.addLocked(got)
	return got
}

// Charge reserves n bytes at once, past the size if it must: for memory
// the holder has to have (the overdraft is counted).
func (p *Pool) Charge(n int64) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if over := p.used + n - p.size; over > 0 {
		p.overdraw += min(over, n)
	}
	p.addLocked(n)
}

// Release gives back n bytes and lets waiters in, in order.
func (p *Pool) Release(n int64) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	p.releaseLocked(n)
	p.mu.Unlock()
}

func (p *Pool) addLocked(n int64) {
	p.used += n
	p.peak = max(p.peak, p.used)
}

func (p *Pool) releaseLocked(n int64) {
	p.used -= n
	if p.used < 0 {
		panic("memory: pool released more than it reserved")
	}
	p.grantLocked()
}

func (p *Pool) grantLocked() {
	for len(p.waiters) > 0 {
		w := p.waiters[0]
		if p.used+w.n > p.size {
			return
		}
		p.addLocked(w.n)
		close(w.ready)
		p.waiters[0] = nil
		p.waiters = p.waiters[1:]
	}
}

func (p *Pool) removeWaiterLocked(w *waiter) {
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return
		}
	}
}

// Stats is a pool's state and history.
type Stats struct {
	Size     int64 // 0: unbounded
	Used     int64
	Peak     int64 // highest Used since the pool was made
	Waiting  int   // reservations waiting now
	Waits    int64 // reservations that had to wait
	Waited   time.Duration
	Trimmed  int64 // reservations granted less than asked without waiting
	Overdraw int64 // bytes charged past the size
}

// Stats reports the pool's state.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Size: p.Size(), Used: p.used, Peak: p.peak, Waiting: len(p.waiters), Waits: p.waits,
		Waited: p.waited, Trimmed: p.trimmed, Overdraw: p.overdraw}
}
