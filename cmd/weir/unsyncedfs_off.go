//go:build !weirchaos

package main

import (
	"log/slog"

	weirlog "github.com/weir-broker/weir/log"
)

// chaosLogFS: only chaos builds (tag weirchaos) track unsynced writes;
// every other build's log uses the OS directly.
func chaosLogFS(*slog.Logger) (weirlog.FS, error) { return nil, nil }
