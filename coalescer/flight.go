package coalescer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// flight is one read, from its submission until every waiter has its
// outcome.
type flight struct {
	// ctx is the initiating fetch's context: the read runs under it, and
	// its ending decides whether a context error is the waiters' business.
	ctx context.Context
	key Key
	// seq numbers the flights of a shard in creation order, so a waiter
	// can tell whether the read started after it arrived.
	seq uint64
	// idx and pos locate the flight's slot; idx is nil for an uncached
	// read, and stops matching the shard's index once the index is dropped.
	idx *index
	pos int

	done chan struct{}

	// Guarded by the shard's mutex.
	waiters   int32
	completed bool

	// Written once, before done is closed. res is &result when the read
	// returned data for someone: the flight and its result are one
	// allocation.
	res       *Result
	err       error
	cancelled bool
	result    Result
}

// initiatorCancelled reports whether err is only the initiating fetch's
// context ending, which waiters with live contexts must not inherit.
func (f *flight) initiatorCancelled(err error) bool {
	return (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) &&
		f.ctx.Err() != nil
}

// call runs the read. A panic here has no caller to unwind to, and would
// leave every waiter hanging, so it becomes their error.
func (f *flight) call(read ReadFunc) (data []byte, watermark int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			data, watermark = nil, 0
			err = fmt.Errorf("%w: %v\n%s", ErrReadPanicked, p, debug.Stack())
		}
	}()
	return read(f.ctx)
}
