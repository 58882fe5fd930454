//go:build !linux

package log

import "os"

// pwritev writes bufs one WriteAt at a time where pwritev(2) is not wired
// up.
func pwritev(f *os.File, bufs [][]byte, off int64) (int64, error) {
	return writeEach(f, bufs, off)
}
