package coalescer

import (
	"context"
	"sync"
)

// workerPool runs a shard's reads on a fixed number of goroutines fed by a
// bounded queue, so a burst of misses cannot spawn goroutines (or reads)
// without limit.
type workerPool struct {
	jobs chan *flight
	wg   sync.WaitGroup

	// mu is held shared by submitters for as long as they may send, and
	// exclusively by close, so no send ever meets a closed channel.
	mu     sync.RWMutex
	closed bool
}

func newWorkerPool(workers, depth int, run func(*flight)) *workerPool {
	p := &workerPool{jobs: make(chan *flight, depth)}
	p.wg.Add(workers)
	for range workers {
		go func() {
			defer p.wg.Done()
			for f := range p.jobs {
				run(f)
			}
		}()
	}
	return p
}

// submit queues f, waiting while the queue is full until ctx ends.
func (p *workerPool) submit(ctx context.Context, f *flight) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	select {
	case p.jobs <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops accepting jobs and waits until the workers have run every
// job already queued.
func (p *workerPool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.jobs)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
