package coalescer

import "context"

// readDirect is the disabled path: the read runs on the caller's goroutine
// and its result gets a single reference, so callers handle both modes the
// same way.
func readDirect(ctx context.Context, read ReadFunc, free func([]byte)) (*Result, error) {
	data, watermark, err := read(ctx)
	if err != nil {
		discard(data, free)
		return nil, err
	}
	return newResult(data, watermark, 1, free), nil
}
