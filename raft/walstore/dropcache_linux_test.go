package walstore

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	hraft "github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

// residentPages is how many of path's pages are in the page cache.
func residentPages(t *testing.T, path string) (resident, total int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() == 0 {
		return 0, 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

// The WAL leaves only its newest cacheWindow bytes in the page cache once
// they are synced; older segments are dropped whole and still read back
// (from the disk), and the references syncLoop holds to them do not keep
// files open past Close.
func TestOnlyTheNewestBytesStayCached(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the page cache of tmpfs is its storage: nothing to drop")
	}
	const segBytes = 16 << 20
	s, err := Open(dir, Options{SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	g := s.Group("g")
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	const entries = 112 // MiB: seven segments, the window four of them
	for i := uint64(1); i <= entries; i++ {
		if err := g.StoreLogs([]*hraft.Log{{Index: i, Term: 1, Type: hraft.LogCommand, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil || len(paths) < 6 {
		t.Fatalf("segments: %v %v", paths, err)
	}
	slices.Sort(paths)
	// Close waits for syncLoop, so the drop after the last write is done.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var behind int64 // bytes of the segments after this one
	for i := len(paths) - 1; i >= 0; i-- {
		resident, total := residentPages(t, paths[i])
		st, err := os.Stat(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case behind >= cacheWindow && resident != 0:
			t.Errorf("%s, %d MiB behind the end: %d of %d pages still cached", filepath.Base(paths[i]), behind>>20, resident, total)
		case i == len(paths)-1 && resident < total/2:
			t.Errorf("%s, the active segment: only %d of %d pages cached", filepath.Base(paths[i]), resident, total)
		}
		behind += st.Size()
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir) {
			t.Errorf("%s still open after Close", target)
		}
	}
	s, err = Open(dir, Options{SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var l hraft.Log
	if err := s.Group("g").GetLog(1, &l); err != nil || !slices.Equal(l.Data, data) {
		t.Fatalf("entry 1 after its pages were dropped: %v (%d bytes)", err, len(l.Data))
	}
}
