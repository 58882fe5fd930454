package memory

import (
	"context"
	"sync/atomic"
	"time"
)

// Reads owns the fetch path's read buffers for their whole life, so that
// each step of it happens in one place:
//
//   - Read takes the bytes a read may use from the budget (trimming a
//     strict read to what is free, letting an obligatory one wait and
//     then overdraw for its first batch), has the read allocate through
//     the free list, and charges the buffer's capacity;
//   - the holder shares the buffer as it likes (the coalescer hands one
//     read to many fetches) and calls Return exactly once, when the last
//     of them is done with it;
//   - Return recycles the buffer, still charged, or drops it and gives
//     its charge back.
//
// Nothing else charges or releases the budget for a read buffer. Reads
// and returns are counted: once every holder is done, Outstanding is 0,
// and a leak or a second Return of one buffer shows as anything else.
type Reads struct {
	budget   *Pool
	buffers  Buffers
	waitFor  time.Duration
	shed     func(short int64) int64
	returned atomic.Int64
	read     atomic.Int64
}

// NewReads draws read buffers from budget, keeping up to maxHeld bytes of
// returned ones for reuse. An obligatory read short of budget waits up to
// wait before it overdraws. shed, when set, is asked to let go of up to
// short bytes held elsewhere (reads kept for later fetches) before a read
// goes short; it returns the bytes it let go.
func NewReads(budget *Pool, maxHeld int64, wait time.Duration, shed func(short int64) int64) *Reads {
	r := &Reads{budget: budget, waitFor: wait, shed: shed}
	r.buffers.Budget, r.buffers.MaxHeld = budget, maxHeld
	return r
}

// ReadFunc reads at most limit bytes (an obligatory read at least its
// first batch whatever the limit) into a buffer it allocates with
// Reads.Get.
type ReadFunc func(limit int) ([]byte, error)

// Get allocates a read buffer of length n, from the free list when it
// can. Only a Read's ReadFunc calls it: Read charges what it returns.
func (r *Reads) Get(n int) []byte { return r.buffers.Get(n) }

// Read runs read with what the budget allows and returns its buffer,
// charged, for the caller to Return; an empty read returns nil and holds
// nothing. A strict read short of budget reads what is free (nil when
// nothing is); an obligatory one waits, then reads its first batch past
// the budget, so that every consumer progresses.
func (r *Reads) Read(ctx context.Context, limit int, obligatory bool, read ReadFunc) ([]byte, error) {
	granted := r.budget.TryAcquireUpTo(int64(limit))
	if short := int64(limit) - granted; short > 0 {
		// Reads kept for later fetches and buffers kept for reuse count
		// against the budget: a read comes first. Shed results' buffers
		// are recycled, so they are lent on too: their bytes go to this
		// read, and most likely a buffer with them.
		var shed int64
		if r.shed != nil {
			shed = r.shed(short)
		}
		if r.buffers.Lend(short) > 0 || shed > 0 {
			granted += r.budget.TryAcquireUpTo(short)
		}
	}
	if granted < int64(limit) {
		switch {
		case !obligatory && granted == 0:
			return nil, nil
		case !obligatory:
			limit = int(granted)
		default:
			r.budget.Release(granted)
			granted = 0
			want := min(int64(limit), max(r.budget.Size(), 1))
			wctx, cancel := context.WithTimeout(ctx, r.waitFor)
			if r.budget.Acquire(wctx, want) == nil {
				granted = want
			}
			cancel()
			if err := ctx.Err(); err != nil {
				r.budget.Release(granted)
				return nil, err
			}
			limit = max(int(granted), 1)
		}
	}
	data, err := read(limit)
	if err != nil || len(data) == 0 {
		// Nothing to hold, nothing to charge.
		r.budget.Release(granted)
		return nil, err
	}
	// Charged by capacity: what the read allocated, a partial last batch
	// it dropped included.
	if n := int64(cap(data)); n > granted {
		r.budget.Charge(n - granted)
	} else {
		r.budget.Release(granted - n)
	}
	r.read.Add(1)
	return data, nil
}

// Return takes back a buffer Read returned, once its last holder is done
// with it; nothing may use it afterwards. A nil buffer is nothing.
func (r *Reads) Return(buf []byte) {
	if buf == nil {
		return
	}
	r.returned.Add(1)
	r.buffers.Recycle(buf)
}

// Outstanding is the number of buffers read and not yet returned.
func (r *Reads) Outstanding() int64 { return r.read.Load() - r.returned.Load() }

// Budget is the pool read buffers are charged to.
func (r *Reads) Budget() *Pool { return r.budget }

// Held describes the returned buffers kept for reuse.
func (r *Reads) Held() BufferStats { return r.buffers.Stats() }

// Lend gives the budget back the bytes of buffers kept for reuse (see
// Buffers.Lend).
func (r *Reads) Lend(n int64) int64 { return r.buffers.Lend(n) }
