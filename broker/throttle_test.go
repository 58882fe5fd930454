package broker

import (
	"context"
	"testing"
	"time"
)

// A throttle lets a second's worth through at once, then holds callers to
// the rate; no rate, no wait; a caller's context ends its wait.
func TestByteThrottle(t *testing.T) {
	var th byteThrottle
	ctx := context.Background()
	start := time.Now()
	if err := th.wait(ctx, 1000, 1000); err != nil { // the burst
		t.Fatal(err)
	}
	if err := th.wait(ctx, 250, 1000); err != nil { // 250 bytes in debt: a quarter second
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("1,250 bytes at 1,000/s passed in %v", d)
	}
	// The wait is the debt at the rate: at most a quarter second (less if
	// the machine stalled between the calls, refilling the bucket).
	if waited := time.Duration(th.waited.Load()); waited <= 0 || waited > 260*time.Millisecond {
		t.Fatalf("waited %v, want up to 250ms", waited)
	}
	if err := th.wait(ctx, 1<<30, 0); err != nil {
		t.Fatalf("unthrottled: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := th.wait(cctx, 10_000, 1000); err == nil {
		t.Fatal("a wait of seconds outlived its context")
	}
}
