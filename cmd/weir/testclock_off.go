//go:build !weirtestlicense

package main

import "time"

// testClock: release builds always run on the wall clock.
func testClock() func() time.Time { return nil }
