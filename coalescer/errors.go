package coalescer

import "errors"

var (
	// ErrClosed is returned by Read after Close.
	ErrClosed = errors.New("coalescer: closed")
	// ErrInvalidOptions is wrapped by New's errors for bad Options.
	ErrInvalidOptions = errors.New("coalescer: invalid options")
	// ErrReadPanicked is wrapped by the error every waiter gets when a
	// ReadFunc panics on a shard worker, where the panic has no caller to
	// unwind to.
	ErrReadPanicked = errors.New("coalescer: read panicked")
	// ErrNilRead is returned by Read when its ReadFunc is nil.
	ErrNilRead = errors.New("coalescer: nil ReadFunc")
)
