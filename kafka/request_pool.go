package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// requestPool bounds the bytes of requests read from sockets and not yet
// handled, broker-wide (Kafka's queued.max.request.bytes, KIP-72). A
// connection reserves a request's size before it allocates the request;
// while the pool is spent it stops reading its socket, so clients are held
// back by TCP instead of the broker growing. Waiters are served in arrival
// order, so a large request is not starved by small ones.
type requestPool struct {
	size int64

	mu      sync.Mutex
	used    int64
	waiters []*poolWaiter // FIFO
	waits   int64         // acquisitions that had to wait
}

type poolWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are reserved for it
}

// errRequestLargerThanPool refuses a request the pool could never hold.
var errRequestLargerThanPool = errors.New("request larger than queued_max_request_bytes")

func newRequestPool(size int64) *requestPool { return &requestPool{size: size} }

// acquire reserves n bytes, waiting (until ctx ends) while the pool is
// spent. A request larger than the whole pool is refused at once.
func (p *requestPool) acquire(ctx context.Context, n int64) error {
	if n > p.size {
		return fmt.Errorf("%w: %d bytes, the pool holds %d", errRequestLargerThanPool, n, p.size)
	}
	p.mu.Lock()
	if len(p.waiters) == 0 && p.used+n <= p.size {
		p.used += n
		p.mu.Unlock()
		return nil
	}
	w := &poolWaiter{n: n, ready: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.waits++
	p.mu.Unlock()

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

// release returns n bytes and lets waiting requests in, in order.
func (p *requestPool) release(n int64) {
	p.mu.Lock()
	p.releaseLocked(n)
	p.mu.Unlock()
}

func (p *requestPool) releaseLocked(n int64) {
	p.used -= n
	if p.used < 0 {
		panic("kafka: request pool released more than it reserved")
	}
	p.grantLocked()
}

func (p *requestPool) grantLocked() {
	for len(p.waiters) > 0 {
		w := p.waiters[0]
		if p.used+w.n > p.size {
			return
		}
		p.used += w.n
		close(w.ready)
		p.waiters[0] = nil
		p.waiters = p.waiters[1:]
	}
}

func (p *requestPool) removeWaiterLocked(w *poolWaiter) {
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return
		}
	}
}

// stats reports the pool's size, the bytes in use and how many
// acquisitions had to wait.
func (p *requestPool) stats() (size, used, waits int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size, p.used, p.waits
}
