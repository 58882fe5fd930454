package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestStopReason(t *testing.T) {
	bg := context.Background()
	mk := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(bg)
		if cause != nil {
			cancel(cause)
		} else {
			t.Cleanup(func() { cancel(nil) })
		}
		return ctx
	}
	for _, tc := range []struct {
		cause   error
		want    string
		wantErr bool
	}{
		{nil, StopRecords, false},
		{ErrTargetReached, StopRecords, false},
		{context.DeadlineExceeded, StopDuration, false},
		{fmt.Errorf("%w: quiet", ErrStall), StopStalled, true},
		{errors.New("NOT_LEADER_FOR_PARTITION"), StopFailed, true},
	} {
		got, err := StopReason(bg, mk(tc.cause))
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("cause %v: got %s, %v", tc.cause, got, err)
		}
	}
	parent, cancel := context.WithCancel(bg)
	cancel()
	if got, err := StopReason(parent, parent); got != StopInterrupted || err == nil {
		t.Errorf("interrupt: got %s, %v", got, err)
	}
}

func TestMonitorCancelsOnStall(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r := &Run{Target: 10, Cancel: cancel, Started: time.Now()}
	var out strings.Builder
	done := make(chan struct{})
	go func() { r.Monitor(ctx, &out, "t", time.Second); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("monitor did not stop a stalled run")
	}
	if !errors.Is(context.Cause(ctx), ErrStall) {
		t.Errorf("cause: %v", context.Cause(ctx))
	}
	if !strings.Contains(out.String(), "0/10 records") {
		t.Errorf("progress line missing: %q", out.String())
	}
}
