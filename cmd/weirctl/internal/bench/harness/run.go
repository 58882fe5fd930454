package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// Reasons a bench run ended; reported in the summary so that a run cut
// short is never mistaken for a complete one.
const (
	StopRecords     = "records"
	StopDuration    = "duration"
	StopInterrupted = "interrupted"
	StopStalled     = "stalled"
	StopFailed      = "failed"
)

var (
	// ErrTargetReached ends a run that has every record it was asked
	// for, which StopReason counts as complete.
	ErrTargetReached = errors.New("bench reached its record target")
	// ErrStall is why Monitor stopped a run in which nothing completed.
	ErrStall = errors.New("stalled")
)

// Run holds the counters shared by workers, the progress printer and
// the stall watchdog.
type Run struct {
	Target  int64
	Done    atomic.Int64
	Bytes   atomic.Int64
	Errs    atomic.Int64
	Started time.Time
	// last is when the most recent record completed. Measuring up to it,
	// not to when the run stopped, keeps a stall or a wait for stragglers
	// from diluting the rate.
	last   atomic.Int64
	Cancel context.CancelCauseFunc
}

// Completed records a completion time; promises and workers run
// concurrently, so it keeps the maximum rather than the last store.
func (r *Run) Completed(at time.Time) {
	n := at.UnixNano()
	for {
		old := r.last.Load()
		if n <= old || r.last.CompareAndSwap(old, n) {
			return
		}
	}
}

// Elapsed runs from Started to the last completed record.
func (r *Run) Elapsed() time.Duration {
	if l := r.last.Load(); l != 0 {
		return time.Duration(l - r.Started.UnixNano())
	}
	return 0
}

// Monitor prints progress to w once a second and cancels the run when
// nothing completes for stallAfter; it returns when ctx ends.
func (r *Run) Monitor(ctx context.Context, w io.Writer, label string, stallAfter time.Duration) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastDone, lastBytes := int64(0), int64(0)
	lastAt, lastProgress := time.Now(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			// Consumers may overshoot the target by a poll; clamp so
			// progress never reads above 100%.
			d, b := min(r.Done.Load(), r.Target), r.Bytes.Load()
			secs := now.Sub(lastAt).Seconds()
			fmt.Fprintf(w, "%s: %d/%d records (%.1f%%), %.0f rec/s, %.2f MB/s\n",
				label, d, r.Target, 100*float64(d)/float64(r.Target),
				float64(d-lastDone)/secs, float64(b-lastBytes)/BytesPerMB/secs)
			if d != lastDone {
				lastProgress = now
			} else if now.Sub(lastProgress) >= stallAfter {
				r.Cancel(fmt.Errorf("%w: no record completed for %s", ErrStall, stallAfter))
			}
			lastDone, lastBytes, lastAt = d, b, now
		}
	}
}

// StopReason classifies how the run context ended.
func StopReason(parent, run context.Context) (string, error) {
	cause := context.Cause(run)
	switch {
	case cause == nil || errors.Is(cause, ErrTargetReached):
		return StopRecords, nil
	case parent.Err() != nil:
		return StopInterrupted, errors.New("interrupted")
	case errors.Is(cause, context.DeadlineExceeded):
		return StopDuration, nil
	case errors.Is(cause, ErrStall):
		return StopStalled, cause
	default:
		return StopFailed, cause
	}
}
