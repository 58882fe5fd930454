//go:build !linux

package log

import "os"

// pwritev writes bufs one WriteAt at a time where pwritev(2) is not wired
// up.
func pwritev(f *os.File, bufs [][]byte, off int64) (int64, error) {
	var total int64
	for _, b := range bufs {
		n, err := f.WriteAt(b, off+total)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
