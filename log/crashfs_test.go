package log

import (
	"bytes"
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
)

// memFS is an in-memory FS that models what survives a crash: file
// contents only up to their last fsync, directory changes (create, remove,
// rename) only up to the directory's last fsync. Every mutating call is a
// numbered step; from step failAt on calls fail with errInjected, either
// all of them (crash: the process is gone, nothing more reaches the disk)
// or only that one (a transient I/O error). image then builds the disk as
// a reboot would find it.
type memFS struct {
	mu      sync.Mutex
	dirs    map[string]bool
	names   map[string]*memInode // current namespace
	durable map[string]*memInode // namespace as of the last directory fsync
	pending []dirOp              // namespace changes since then, in order
	steps   int
	failAt  int  // step that fails; < 0: none
	crash   bool // every step from failAt on fails, not just that one
}

type memInode struct {
	data   []byte // what reads see
	synced []byte // what a crash keeps
}

type dirOp struct {
	from, to string // remove: to == ""; create: from == ""
	ino      *memInode
}

func newMemFS() *memFS {
	return &memFS{dirs: map[string]bool{}, names: map[string]*memInode{}, durable: map[string]*memInode{}, failAt: -1}
}

// step is called (with mu held) before every mutation.
func (m *memFS) step() error {
	n := m.steps
	m.steps++
	if m.failAt >= 0 && (n == m.failAt || (m.crash && n > m.failAt)) {
		return errInjected
	}
	return nil
}

// stepCount reports how many mutating calls were made so far.
func (m *memFS) stepCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.steps
}

// failFrom arms a crash (every call from step n on fails) or, with crash
// unset, a single failing call at step n.
func (m *memFS) failFrom(n int, crash bool) {
	m.mu.Lock()
	m.failAt, m.crash = n, crash
	m.mu.Unlock()
}

type crashMode int

const (
	keepSynced crashMode = iota // only fsynced data and directory changes
	keepAll                     // the page cache reached the disk after all
	keepRandom                  // per file: synced, current, or a torn append in between; a prefix of pending directory changes
)

func (c crashMode) String() string {
	return [...]string{"keepSynced", "keepAll", "keepRandom"}[c]
}

// image returns the disk after a crash now, as a fresh memFS.
func (m *memFS) image(mode crashMode, rng *rand.Rand) *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	ns := make(map[string]*memInode, len(m.durable))
	for k, v := range m.durable {
		ns[k] = v
	}
	n := 0
	switch mode {
	case keepAll:
		n = len(m.pending)
	case keepRandom:
		n = rng.IntN(len(m.pending) + 1)
	}
	for _, op := range m.pending[:n] {
		if op.from != "" {
			delete(ns, op.from)
		}
		if op.to != "" {
			ns[op.to] = op.ino
		}
	}
	out := newMemFS()
	for k := range m.dirs {
		out.dirs[k] = true
	}
	for name, ino := range ns {
		var data []byte
		switch mode {
		case keepSynced:
			data = ino.synced
		case keepAll:
			data = ino.data
		case keepRandom:
			switch rng.IntN(3) {
			case 0:
				data = ino.synced
			case 1:
				data = ino.data
			default:
				// A torn append: part of the unsynced tail made it.
				data = ino.synced
				if len(ino.data) > len(ino.synced) && bytes.HasPrefix(ino.data, ino.synced) {
					data = ino.data[:len(ino.synced)+rng.IntN(len(ino.data)-len(ino.synced)+1)]
				}
			}
		}
		c := &memInode{data: slices.Clone(data)}
		c.synced = slices.Clone(c.data)
		out.names[name] = c
		out.durable[name] = c
	}
	return out
}

func notExist(op, name string) error { return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist} }

func (m *memFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[name] {
		return &memFile{fs: m, name: name, dir: true}, nil
	}
	ino, ok := m.names[name]
	switch {
	case !ok && flag&os.O_CREATE == 0:
		return nil, notExist("open", name)
	case !ok:
		if !m.dirs[filepath.Dir(name)] {
			return nil, notExist("open", name)
		}
		if err := m.step(); err != nil {
			return nil, err
		}
		ino = &memInode{}
		m.names[name] = ino
		m.pending = append(m.pending, dirOp{to: name, ino: ino})
	case flag&os.O_TRUNC != 0:
		if err := m.step(); err != nil {
			return nil, err
		}
		ino.data = nil
	}
	return &memFile{fs: m, name: name, ino: ino}, nil
}

func (m *memFS) Remove(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.names[name]
	if !ok {
		return notExist("remove", name)
	}
	if err := m.step(); err != nil {
		return err
	}
	delete(m.names, name)
	m.pending = append(m.pending, dirOp{from: name, ino: ino})
	return nil
}

func (m *memFS) Rename(oldpath, newpath string) error {
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
	m.pending = append(m.pending, dirOp{from: oldpath, to: newpath, ino: ino})
	return nil
}

func (m *memFS) ReadDir(dir string) ([]fs.DirEntry, error) {
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

func (m *memFS) MkdirAll(path string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := filepath.Clean(path); !m.dirs[p]; p = filepath.Dir(p) {
		m.dirs[p] = true
	}
	return nil
}

// files lists the names in dir, for assertions.
func (m *memFS) files(dir string) []string {
	ents, _ := m.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

type memFile struct {
	fs   *memFS
	name string
	ino  *memInode
	dir  bool
	off  int64 // for Write
}

func (f *memFile) ReadAt(b []byte, off int64) (int, error) {
	if f.dir {
		return 0, errors.New("read of a directory")
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.ino.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(b []byte, off int64) (int, error) {
	if f.dir {
		return 0, errors.New("write to a directory")
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	if end := off + int64(len(b)); end > int64(len(f.ino.data)) {
		f.ino.data = append(f.ino.data, make([]byte, end-int64(len(f.ino.data)))...)
	}
	copy(f.ino.data[off:], b)
	return len(b), nil
}

func (f *memFile) Write(b []byte) (int, error) {
	n, err := f.WriteAt(b, f.off)
	f.off += int64(n)
	return n, err
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step(); err != nil {
		return err
	}
	if size <= int64(len(f.ino.data)) {
		f.ino.data = f.ino.data[:size:size]
	} else {
		f.ino.data = append(f.ino.data, make([]byte, size-int64(len(f.ino.data)))...)
	}
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step(); err != nil {
		return err
	}
	if f.dir {
		// One partition directory per test: persist every pending change.
		f.fs.durable = make(map[string]*memInode, len(f.fs.names))
		for k, v := range f.fs.names {
			f.fs.durable[k] = v
		}
		f.fs.pending = nil
		return nil
	}
	f.ino.synced = slices.Clone(f.ino.data)
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	var size int64
	if !f.dir {
		size = int64(len(f.ino.data))
	}
	return memInfo{name: filepath.Base(f.name), size: size, dir: f.dir}, nil
}

func (f *memFile) Close() error { return nil }

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
