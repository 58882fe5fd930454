package log

import (
	"os"

	"golang.org/x/sys/unix"
)

func dropCache(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED)
	})
}
