package coalescer

import "sync/atomic"

// Result is a shared, reference-counted read result. Data is read-only: the
// same backing array goes to every holder.
type Result struct {
	Data []byte
	// Watermark is the high watermark (last stable offset for
	// read_committed) the read was bounded by.
	Watermark int64

	refs atomic.Int32
	free func([]byte)
	// parent is set for a view of part of another result (a range hit):
	// the view's last Release releases its reference to the parent.
	parent *Result
}

func newResult(data []byte, watermark int64, refs int32, free func([]byte)) *Result {
	r := new(Result)
	r.init(data, watermark, refs, free)
	return r
}

func (r *Result) init(data []byte, watermark int64, refs int32, free func([]byte)) {
	r.Data, r.Watermark, r.free = data, watermark, free
	r.refs.Store(refs)
}

// newView is a result holding data, a part of parent's Data, with the
// caller's reference to parent.
func newView(parent *Result, data []byte, watermark int64) *Result {
	r := &Result{Data: data, Watermark: watermark, parent: parent}
	r.refs.Store(1)
	return r
}

// tryAcquire adds a reference unless the last one is already gone: a
// result whose bytes were dropped must never come back to life through a
// cache slot that still points at it.
func (r *Result) tryAcquire() bool {
	for {
		n := r.refs.Load()
		if n <= 0 {
			return false
		}
		if r.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release gives up the caller's reference. Each holder calls it exactly
// once; Data must not be used afterwards. The last release drops Data and
// hands it to Options.Free. Releasing more references than were handed out
// panics, because it means some holder's bytes were freed under it.
func (r *Result) Release() {
	n := r.refs.Add(-1)
	if n > 0 {
		return
	}
	if n < 0 {
		panic("coalescer: Result released more times than it was returned")
	}
	data := r.Data
	r.Data = nil
	if r.parent != nil {
		r.parent.Release()
		return
	}
	discard(data, r.free)
}

// discard hands data nobody holds any more to the buffer pool, if any.
func discard(data []byte, free func([]byte)) {
	if free != nil && data != nil {
		free(data)
	}
}
