//go:build weirchaos

package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	weirlog "github.com/weir-broker/weir/log"
)

// Builds with the weirchaos tag (the fault-injection suite's brokers) can
// lose, at a restart, what the partition logs wrote since their last
// fsync, as a machine crash would: a kill -9 alone keeps the page cache,
// so it never loses those writes.
//
// WEIR_CHAOS_UNSYNCED_DIR names a journal directory. While the broker
// runs, the log's files are tracked there: for each file created or
// fsynced in this run, the size it had at its last fsync (0 for a file
// never fsynced). A test that wants the next crash to lose unsynced
// writes creates the file "crash" in the journal directory before it
// kills the broker; at the next start the broker truncates every tracked
// file back to its fsynced size before opening anything, removes the
// marker, and starts a fresh journal.
//
// What it covers: appends to the partition logs' segments and indexes
// and the files replaced whole beside them (the replicas' Raft
// checkpoints): everything written through the log package's FS. What it does not:
// overwrites inside the fsynced part of a file (the log only appends, and
// rebuilds indexes on recovery); a created or renamed file whose
// directory was not fsynced (it stays, emptied to its fsynced size); and
// files written outside the log package's FS: the Raft state (the
// shared Raft log, which fsyncs before it answers, and snapshots) and the
// controller's state.
const unsyncedDirEnv = "WEIR_CHAOS_UNSYNCED_DIR"

// crashMarker is the file in the journal directory that asks the next
// start to drop unsynced writes.
const crashMarker = "crash"

// chaosLogFS returns the tracking FS, or nil (the OS) when the variable is
// unset, after applying a pending crash to the files of the last run.
func chaosLogFS(logger *slog.Logger) (weirlog.FS, error) {
	dir := os.Getenv(unsyncedDirEnv)
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", unsyncedDirEnv, err)
	}
	j := &syncJournal{dir: dir, synced: map[string]int64{}}
	if _, err := os.Stat(filepath.Join(dir, crashMarker)); err == nil {
		files, dropped, err := j.dropUnsynced()
		if err != nil {
			return nil, fmt.Errorf("dropping unsynced log writes: %w", err)
		}
		logger.Warn("chaos build: dropped the partition logs' unsynced writes of the last run, as a machine crash would", "files", files, "bytes", dropped)
	}
	if err := j.reset(); err != nil {
		return nil, err
	}
	return &unsyncedFS{j: j}, nil
}

// syncJournal records each tracked file's fsynced size in an entry file
// of its own (named by a hash of the path; "<size> <path>"), replaced by
// rename so that a kill leaves the old entry or the new one.
type syncJournal struct {
	dir    string
	mu     sync.Mutex
	synced map[string]int64
}

func (j *syncJournal) entryPath(path string) string {
	h := fnv.New64a()
	h.Write([]byte(path))
	return filepath.Join(j.dir, fmt.Sprintf("%016x.entry", h.Sum64()))
}

func (j *syncJournal) set(path string, size int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.synced[path] = size
	entry := j.entryPath(path)
	tmp := entry + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(size, 10)+" "+path), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, entry)
}

func (j *syncJournal) get(path string) (int64, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	size, ok := j.synced[path]
	return size, ok
}

func (j *syncJournal) forget(path string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.synced, path)
	if err := os.Remove(j.entryPath(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// dropUnsynced truncates every journalled file longer than its fsynced
// size back to it.
func (j *syncJournal) dropUnsynced() (files int, dropped int64, err error) {
	entries, err := filepath.Glob(filepath.Join(j.dir, "*.entry"))
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		data, err := os.ReadFile(e)
		if err != nil {
			return files, dropped, err
		}
		sizeText, path, ok := strings.Cut(string(data), " ")
		size, perr := strconv.ParseInt(sizeText, 10, 64)
		if !ok || perr != nil {
			return files, dropped, fmt.Errorf("journal entry %s: malformed", e)
		}
		st, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return files, dropped, err
		}
		if st.Size() > size {
			if err := os.Truncate(path, size); err != nil {
				return files, dropped, err
			}
			files++
			dropped += st.Size() - size
		}
	}
	return files, dropped, nil
}

// reset empties the journal: what is on disk now is this run's start.
func (j *syncJournal) reset() error {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(j.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// unsyncedFS is the OS file system with the journal kept up to date.
type unsyncedFS struct {
	weirlog.OSFS
	j *syncJournal
}

func (u *unsyncedFS) OpenFile(name string, flag int, perm fs.FileMode) (weirlog.File, error) {
	_, statErr := os.Stat(name)
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := u.j.set(name, 0); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &trackedFile{File: f, j: u.j, path: name}, nil
}

func (u *unsyncedFS) Remove(name string) error {
	if err := os.Remove(name); err != nil {
		return err
	}
	return u.j.forget(name)
}

// Rename keeps the journal right at every instant, since the broker may be
// killed between any two steps: a rename is atomic on disk, so whichever
// content newpath has after a crash must come back whole. Before the
// rename newpath is journalled at the larger of its current size and the
// size it is about to get; after it, at the new size.
func (u *unsyncedFS) Rename(oldpath, newpath string) error {
	if err := u.j.beforeRename(oldpath, newpath); err != nil {
		return err
	}
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	return u.j.afterRename(oldpath, newpath)
}

func (j *syncJournal) beforeRename(oldpath, newpath string) error {
	size, tracked := j.get(oldpath)
	if !tracked {
		// newpath gets content this run never wrote: nothing to drop.
		return j.forget(newpath)
	}
	cover := size
	if prev, ok := j.get(newpath); ok {
		cover = max(cover, prev)
	} else if st, err := os.Stat(newpath); err == nil {
		cover = max(cover, st.Size())
	}
	return j.set(newpath, cover)
}

func (j *syncJournal) afterRename(oldpath, newpath string) error {
	size, tracked := j.get(oldpath)
	if err := j.forget(oldpath); err != nil {
		return err
	}
	if tracked {
		return j.set(newpath, size)
	}
	return nil
}

// trackedFile journals its size at every fsync.
type trackedFile struct {
	*os.File
	j    *syncJournal
	path string
}

func (f *trackedFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return nil
	}
	return f.j.set(f.path, st.Size())
}

func (f *trackedFile) Truncate(size int64) error {
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	if synced, ok := f.j.get(f.path); ok && synced > size {
		return f.j.set(f.path, size)
	}
	return nil
}
