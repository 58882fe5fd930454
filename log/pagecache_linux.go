package log

import (
	"os"

	"golang.org/x/sys/unix"
)

func dropCache(f *os.File, off, n int64) {
	withFd(f, func(fd int) { _ = unix.Fadvise(fd, off, n, unix.FADV_DONTNEED) })
}

func startWriteback(f *os.File, off, n int64) {
	withFd(f, func(fd int) { _ = unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE) })
}

// withFd runs fn with f's descriptor, if f still has one.
func withFd(f *os.File, fn func(fd int)) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { fn(int(fd)) })
}
