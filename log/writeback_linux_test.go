package log

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// dirtyPages is how many pages of path's first n bytes are dirty or
// under writeback (cachestat(2), Linux 6.5).
func dirtyPages(t *testing.T, path string, n int64) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Cachestat_t
	err = unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: 0, Len: uint64(n)}, &st, 0)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("cachestat: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Dirty + st.Writeback
}

// An appended segment's bytes go to the disk as they are written, a
// megabyte at a time, rather than all at the next fsync: well before
// the kernel's flusher would take them (30 s by default), the pages
// behind the last started megabyte are clean, with no Sync.
func TestAppendStartsWriteback(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs pages are never written back")
	}
	l := mustOpen(t, dir, testConfig(nil))
	defer l.Close()
	batch := simpleBatch(t, 64, 1, 1000)
	for l.Size() < 8<<20 {
		mustAppend(t, l, batch)
	}
	path := filepath.Join(dir, "00000000000000000000.log")
	// Everything below the last start is at least in flight.
	written := (l.Size() - writebackChunk) &^ (int64(os.Getpagesize()) - 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := dirtyPages(t, path, written)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pages of the first %d bytes still dirty 10 s after the appends", n, written)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
