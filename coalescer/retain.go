package coalescer

import (
	"sync"
	"time"
)

// retainer keeps the newest results referenced after their fetches
// released them, up to a byte bound (Options.RetainBytes), so that
// fetches arriving a little later find them: consumers reading a backlog
// together drift apart by a few fetches, and without retention a result
// is gone as soon as the fetch that read it has written its answer. The
// oldest result goes first, and none is kept longer than maxAge: past
// that, the fetches it could serve have moved on, and tailing consumers
// would otherwise keep the bound's worth of small stale results alive.
// The owner of the memory (the fetch budget) sheds retained results when
// a read needs the bytes.
type retainer struct {
	max    int64
	maxAge time.Duration

	mu    sync.Mutex
	queue []retained // oldest first, from head
	head  int
	bytes int64
	// off while coalescing is switched off: a read that completes after
	// the switch is not kept past it.
	off bool
}

type retained struct {
	res  *Result
	size int64 // cap(res.Data) when kept: what its buffer is charged
	at   time.Time
}

// keep takes over a reference to res (one the caller counted for it) and
// drops the oldest results past the bound.
func (r *retainer) keep(res *Result) {
	size := int64(cap(res.Data))
	now := time.Now()
	r.mu.Lock()
	if r.off {
		r.mu.Unlock()
		res.Release()
		return
	}
	r.queue = append(r.queue, retained{res, size, now})
	r.bytes += size
	// Usually one result in, one out; a few more when a large one came.
	// Expire lets go of the rest of what aged.
	var drop [4]*Result
	n := 0
	for n < len(drop) && (r.bytes > r.max || now.Sub(r.queue[r.head].at) > r.maxAge) {
		drop[n] = r.popLocked()
		n++
	}
	r.mu.Unlock()
	for _, d := range drop[:n] {
		d.Release()
	}
}

// shed releases the oldest results until at least n bytes were let go or
// none is left, and returns the bytes let go (freed unless a fetch still
// holds them).
func (r *retainer) shed(n int64) int64 {
	var gone []*Result
	var shed int64
	r.mu.Lock()
	for shed < n && r.head < len(r.queue) {
		shed += r.queue[r.head].size
		gone = append(gone, r.popLocked())
	}
	r.mu.Unlock()
	for _, g := range gone {
		g.Release()
	}
	return shed
}

// switchOn starts or stops retaining; stopping lets every result go.
func (r *retainer) switchOn(on bool) {
	r.mu.Lock()
	r.off = !on
	r.mu.Unlock()
	if !on {
		r.shed(1 << 62)
	}
}

// expire lets go of the results kept longer than maxAge.
func (r *retainer) expire(now time.Time) {
	var gone []*Result
	r.mu.Lock()
	for r.head < len(r.queue) && now.Sub(r.queue[r.head].at) > r.maxAge {
		gone = append(gone, r.popLocked())
	}
	r.mu.Unlock()
	for _, g := range gone {
		g.Release()
	}
}

// popLocked removes the oldest result; the caller releases it.
func (r *retainer) popLocked() *Result {
	e := r.queue[r.head]
	r.queue[r.head] = retained{}
	r.head++
	r.bytes -= e.size
	if r.head == len(r.queue) {
		r.queue, r.head = r.queue[:0], 0
	} else if r.head > len(r.queue)/2 && r.head > 64 {
		n := copy(r.queue, r.queue[r.head:])
		clear(r.queue[n:])
		r.queue, r.head = r.queue[:n], 0
	}
	return e.res
}

// size reports the bytes retained.
func (r *retainer) size() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}
