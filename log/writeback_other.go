//go:build !linux

package log

import "os"

func startWriteback(*os.File, int64, int64) {}
