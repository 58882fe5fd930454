package log

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// pwritev writes bufs at off with pwritev(2), resuming after short writes
// and EINTR.
func pwritev(f *os.File, bufs [][]byte, off int64) (int64, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	iov := consumeIOV(append([][]byte(nil), bufs...), 0)
	var total int64
	for len(iov) > 0 {
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Pwritev(int(fd), iov[:min(len(iov), maxIOV)], off+total)
			return true
		}); err != nil {
			return total, err
		}
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: werr}
		}
		if n <= 0 {
			return total, shortWrite(f, off+total)
		}
		total += int64(n)
		iov = consumeIOV(iov, n)
	}
	return total, nil
}

// consumeIOV drops the first n bytes of iov, whose buffers it may
// reslice (it is the caller's own copy of the outer slice), and the
// empty buffers left at its front.
func consumeIOV(iov [][]byte, n int) [][]byte {
	for len(iov) > 0 && n >= len(iov[0]) {
		n -= len(iov[0])
		iov = iov[1:]
	}
	if n > 0 {
		iov[0] = iov[0][n:]
	}
	return iov
}

// shortWrite is the error of a write that made no progress.
func shortWrite(f *os.File, off int64) error {
	return fmt.Errorf("log: writing %s at %d: %w", f.Name(), off, io.ErrShortWrite)
}
