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

// skipWithoutDirectIO skips where the directory's file system keeps its
// files in the page cache whatever the flags (tmpfs).
func skipWithoutDirectIO(t *testing.T, dir string) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the page cache of tmpfs is its storage")
	}
}

// The WAL's writes bypass the page cache (direct.go): once 112 MiB went
// through seven segments, none of them has more than its header page
// cached, a clean Close leaves every file ending at its last record, old
// entries are read back from the disk and the newest from the ring, and
// the handles of deleted or rolled segments do not outlive Close.
func TestWrittenBytesStayOutOfThePageCache(t *testing.T) {
	dir := t.TempDir()
	skipWithoutDirectIO(t, dir)
	const segBytes = 16 << 20
	s, err := Open(dir, Options{SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	g := s.Group("g")
	data := make([]byte, 1<<20+333) // every write ends inside a block
	for i := range data {
		data[i] = byte(i * 7)
	}
	const entries = 100
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
	active := paths[len(paths)-1]
	var l hraft.Log
	for i := uint64(entries - 5); i <= entries; i++ {
		if err := g.GetLog(i, &l); err != nil || !slices.Equal(l.Data, data) {
			t.Fatalf("entry %d: %v (%d bytes)", i, err, len(l.Data))
		}
	}
	if resident, total := residentPages(t, active); resident > 1 {
		t.Errorf("%s, the active segment, read back from the ring: %d of %d pages cached", filepath.Base(active), resident, total)
	}
	if st := s.Stats(); st.RingReads != 6 || st.FileReads != 0 {
		t.Errorf("the newest 6 entries read back: %d from the ring, %d from files", st.RingReads, st.FileReads)
	}
	diskBytes := s.Stats().DiskBytes
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var fileBytes int64
	for _, p := range paths {
		resident, total := residentPages(t, p)
		if resident > 1 {
			t.Errorf("%s: %d of %d pages cached", filepath.Base(p), resident, total)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		fileBytes += st.Size()
	}
	if fileBytes != diskBytes {
		t.Errorf("segment files hold %d bytes after Close, their records %d: padding left behind", fileBytes, diskBytes)
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
	for _, i := range []uint64{1, entries} {
		if err := s.Group("g").GetLog(i, &l); err != nil || !slices.Equal(l.Data, data) {
			t.Fatalf("entry %d after reopening: %v (%d bytes)", i, err, len(l.Data))
		}
	}
	if st := s.Stats(); st.FileReads != 2 || st.RingReads != 0 {
		// Reopened, nothing written yet: the ring holds nothing.
		t.Errorf("after reopening, entries 1 and %d read back: %d from the ring, %d from files", entries, st.RingReads, st.FileReads)
	}
	if resident, total := residentPages(t, paths[0]); resident < 256 {
		t.Errorf("%s: entry 1 read back, yet only %d of %d pages cached: was it read at all?", filepath.Base(paths[0]), resident, total)
	}
}

// The ring wraps around inside a segment bigger than itself: every entry
// still reads back as written, the newest from the ring (nothing of them
// enters the page cache), the older ones from the disk.
func TestRingWrapsInsideASegment(t *testing.T) {
	dir := t.TempDir()
	skipWithoutDirectIO(t, dir)
	s, err := Open(dir, Options{SegmentBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := s.Group("g")
	want := func(i uint64) []byte {
		b := make([]byte, 700<<10+int(i)*37)
		for j := range b {
			b[j] = byte(uint64(j)*31 + i)
		}
		return b
	}
	const entries = 150 // about 105 MiB: the ring wraps once and a half
	for i := uint64(1); i <= entries; i += 3 {
		logs := []*hraft.Log{}
		for j := i; j < i+3; j++ {
			logs = append(logs, &hraft.Log{Index: j, Term: 1, Type: hraft.LogCommand, Data: want(j)})
		}
		if err := g.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if len(paths) != 1 {
		t.Fatalf("segments: %v", paths)
	}
	var l hraft.Log
	for i := uint64(entries); i > entries-80; i-- {
		if err := g.GetLog(i, &l); err != nil || !slices.Equal(l.Data, want(i)) {
			t.Fatalf("entry %d: %v (%d bytes, want %d)", i, err, len(l.Data), len(want(i)))
		}
	}
	if resident, total := residentPages(t, paths[0]); resident > 1 {
		t.Errorf("the newest entries came from the disk: %d of %d pages cached", resident, total)
	}
	for i := uint64(1); i <= entries-80; i++ {
		if err := g.GetLog(i, &l); err != nil || !slices.Equal(l.Data, want(i)) {
			t.Fatalf("entry %d: %v (%d bytes, want %d)", i, err, len(l.Data), len(want(i)))
		}
	}
}
