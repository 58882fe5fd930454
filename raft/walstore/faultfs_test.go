package walstore

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/weir-broker/weir/log"
)

var errInjected = errors.New("injected I/O error")

// faultFS is an in-memory log.FS that models what a crash keeps: file
// bytes up to their last fsync, and directory entries (creations,
// removals) up to the directory's last fsync. It can fail chosen calls
// and produce the disk a reboot would find.
type faultFS struct {
	mu      sync.Mutex
	dirs    map[string]bool
	names   map[string]*inode // what the running process sees
	durable map[string]*inode // namespace as of the last directory fsync

	steps     int // mutating calls so far (writes, syncs, creates, removes)
	crashAt   int // from this step on every mutation fails; < 0: never
	failSyncs int // fail the next n file Syncs (transient: the store must still stop)
	failWrite int // fail the next n WriteAt/Write calls
	syncHook  func(name string)
	writeHook func(name string)
}

type inode struct {
	data   []byte // what reads see
	synced []byte // what a crash keeps
	dirty  bool   // bytes below len(synced) changed since the last fsync
}

func newFaultFS() *faultFS {
	return &faultFS{dirs: map[string]bool{}, names: map[string]*inode{}, durable: map[string]*inode{}, crashAt: -1}
}

// step is called with mu held before every mutation.
func (m *faultFS) step() error {
	n := m.steps
	m.steps++
	if m.crashAt >= 0 && n >= m.crashAt {
		return errInjected
	}
	return nil
}

func (m *faultFS) stepCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.steps
}

// crashFrom makes every mutation from step n on fail, as if the machine
// died there.
func (m *faultFS) crashFrom(n int) {
	m.mu.Lock()
	m.crashAt = n
	m.mu.Unlock()
}

func (m *faultFS) failNextSyncs(n int) {
	m.mu.Lock()
	m.failSyncs = n
	m.mu.Unlock()
}

func (m *faultFS) failNextWrites(n int) {
	m.mu.Lock()
	m.failWrite = n
	m.mu.Unlock()
}

// setWriteHook runs fn (without the lock) at the start of every file
// WriteAt.
func (m *faultFS) setWriteHook(fn func(name string)) {
	m.mu.Lock()
	m.writeHook = fn
	m.mu.Unlock()
}

// setSyncHook runs fn (without the lock) at the start of every file Sync.
func (m *faultFS) setSyncHook(fn func(name string)) {
	m.mu.Lock()
	m.syncHook = fn
	m.mu.Unlock()
}

type crashMode int

const (
	keepSynced  crashMode = iota // only fsynced bytes and directory changes
	keepAll                      // the page cache reached the disk after all
	keepTorn                     // per file: a random part of the unsynced tail
	keepGarbage                  // torn, then random bytes after it
	numCrashModes
)

func (c crashMode) String() string {
	return [...]string{"keepSynced", "keepAll", "keepTorn", "keepGarbage"}[c]
}

// image returns the disk after a crash now, as a fresh faultFS.
func (m *faultFS) image(mode crashMode, rng *rand.Rand) *faultFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	ns := make(map[string]*inode, len(m.durable))
	for k, v := range m.durable {
		ns[k] = v
	}
	if mode != keepSynced {
		// Undurable directory changes may or may not have made it.
		for k, v := range m.names {
			if _, ok := ns[k]; !ok && (mode == keepAll || rng.IntN(2) == 0) {
				ns[k] = v
			}
		}
		for k := range ns {
			if _, ok := m.names[k]; !ok && (mode == keepAll || rng.IntN(2) == 0) {
				delete(ns, k)
			}
		}
	}
	out := newFaultFS()
	for k := range m.dirs {
		out.dirs[k] = true
	}
	for name, ino := range ns {
		data := ino.synced
		switch mode {
		case keepAll:
			data = ino.data
		case keepTorn, keepGarbage:
			if !ino.dirty && len(ino.data) > len(ino.synced) {
				data = ino.data[:len(ino.synced)+rng.IntN(len(ino.data)-len(ino.synced)+1)]
			}
		}
		c := slices.Clone(data)
		// Garbage lands only where a write was in flight: after a file's
		// synced bytes, never in a file that was fully synced.
		if mode == keepGarbage && len(ino.data) > len(ino.synced) && rng.IntN(2) == 0 {
			g := make([]byte, 1+rng.IntN(64))
			for i := range g {
				g[i] = byte(rng.Uint32())
			}
			c = append(c, g...)
		}
		n := &inode{data: c, synced: slices.Clone(c)}
		out.names[name] = n
		out.durable[name] = n
	}
	return out
}

// fileData returns a file's current bytes, for tests that damage files.
func (m *faultFS) fileData(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ino := m.names[filepath.Clean(name)]; ino != nil {
		return slices.Clone(ino.data)
	}
	return nil
}

// setFileData replaces a file's bytes, durably.
func (m *faultFS) setFileData(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino := m.names[filepath.Clean(name)]
	ino.data, ino.synced, ino.dirty = slices.Clone(b), slices.Clone(b), false
}

func (m *faultFS) files(dir string) []string {
	ents, _ := m.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func (m *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[name] {
		return &faultFile{fs: m, name: name, dir: true}, nil
	}
	ino, ok := m.names[name]
	switch {
	case ok && flag&os.O_EXCL != 0 && flag&os.O_CREATE != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, notExist("open", name)
	case !ok:
		if !m.dirs[filepath.Dir(name)] {
			return nil, notExist("open", name)
		}
		if err := m.step(); err != nil {
			return nil, err
		}
		ino = &inode{}
		m.names[name] = ino
	case flag&os.O_TRUNC != 0:
		if err := m.step(); err != nil {
			return nil, err
		}
		ino.data, ino.dirty = nil, true
	}
	return &faultFile{fs: m, name: name, ino: ino}, nil
}

func (m *faultFS) Remove(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.names[name]; !ok {
		return notExist("remove", name)
	}
	if err := m.step(); err != nil {
		return err
	}
	delete(m.names, name)
	return nil
}

func (m *faultFS) Rename(oldpath, newpath string) error {
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.names[oldpath]
	if !ok {
		return notExist("rename", oldpath)
	}
	if err := m.step(); err != nil {
		return err
	}
	delete(m.names, oldpath)
	m.names[newpath] = ino
	return nil
}

func (m *faultFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, notExist("readdir", dir)
	}
	var out []fs.DirEntry
	for name := range m.names {
		if filepath.Dir(name) == dir {
			out = append(out, memEntry(filepath.Base(name)))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

func (m *faultFS) MkdirAll(path string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := filepath.Clean(path); !m.dirs[p]; p = filepath.Dir(p) {
		m.dirs[p] = true
	}
	return nil
}

type faultFile struct {
	fs     *faultFS
	name   string
	ino    *inode
	dir    bool
	off    int64
	closed bool
}

func (f *faultFile) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.dir || f.closed {
		return 0, os.ErrClosed
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.ino.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	hook := f.fs.writeHook
	f.fs.mu.Unlock()
	if hook != nil && !f.dir {
		hook(f.name)
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.dir || f.closed {
		return 0, os.ErrClosed
	}
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	if f.fs.failWrite > 0 {
		f.fs.failWrite--
		// A short write: half of it landed.
		b = b[:len(b)/2]
		f.writeLocked(b, off)
		return len(b), errInjected
	}
	f.writeLocked(b, off)
	return len(b), nil
}

func (f *faultFile) writeLocked(b []byte, off int64) {
	if off < int64(len(f.ino.synced)) {
		f.ino.dirty = true
	}
	if end := off + int64(len(b)); end > int64(len(f.ino.data)) {
		f.ino.data = append(f.ino.data, make([]byte, end-int64(len(f.ino.data)))...)
	}
	copy(f.ino.data[off:], b)
}

func (f *faultFile) Write(b []byte) (int, error) {
	n, err := f.WriteAt(b, f.off)
	f.off += int64(n)
	return n, err
}

func (f *faultFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step(); err != nil {
		return err
	}
	if size < int64(len(f.ino.synced)) {
		f.ino.dirty = true
	}
	if size <= int64(len(f.ino.data)) {
		f.ino.data = f.ino.data[:size:size]
	} else {
		f.ino.data = append(f.ino.data, make([]byte, size-int64(len(f.ino.data)))...)
	}
	return nil
}

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	hook := f.fs.syncHook
	f.fs.mu.Unlock()
	if hook != nil && !f.dir {
		hook(f.name)
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step(); err != nil {
		return err
	}
	if f.dir {
		// One store per directory in these tests: persist every change.
		f.fs.durable = make(map[string]*inode, len(f.fs.names))
		for k, v := range f.fs.names {
			f.fs.durable[k] = v
		}
		return nil
	}
	if f.fs.failSyncs > 0 {
		f.fs.failSyncs--
		return errInjected
	}
	if f.ino.dirty {
		f.ino.synced = slices.Clone(f.ino.data)
	} else {
		f.ino.synced = append(f.ino.synced, f.ino.data[len(f.ino.synced):]...)
	}
	f.ino.dirty = false
	return nil
}

func (f *faultFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	var size int64
	if !f.dir {
		size = int64(len(f.ino.data))
	}
	return memInfo{name: filepath.Base(f.name), size: size, dir: f.dir}, nil
}

func (f *faultFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return nil
}

type memEntry string

func (e memEntry) Name() string               { return string(e) }
func (e memEntry) IsDir() bool                { return false }
func (e memEntry) Type() fs.FileMode          { return 0 }
func (e memEntry) Info() (fs.FileInfo, error) { return memInfo{name: string(e)}, nil }

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
