//go:build weirtestlicense

package main

import (
	"os"
	"strings"
	"sync"
	"time"
)

// testClockFileEnv names a file holding a Go duration (e.g. "744h") that
// the broker's clock runs ahead of the wall clock by. Only test builds
// (tag weirtestlicense) read it, so integration tests can move a
// cluster's license clock past a trial or an expiry without waiting.
const testClockFileEnv = "WEIR_TEST_CLOCK_FILE"

// testClock returns the shifted clock, or nil (the wall clock) when the
// variable is unset. The file is read at most every 100ms; an unreadable
// or malformed file leaves the last offset in place.
func testClock() func() time.Time {
	path := os.Getenv(testClockFileEnv)
	if path == "" {
		return nil
	}
	var (
		mu     sync.Mutex
		offset time.Duration
		read   time.Time
	)
	return func() time.Time {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if now.Sub(read) >= 100*time.Millisecond {
			read = now
			if b, err := os.ReadFile(path); err == nil {
				if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
					offset = d
				}
			}
		}
		return now.Add(offset)
	}
}
