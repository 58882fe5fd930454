package log

import (
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// stallFS holds the first fsync of a segment file after it is armed until
// released, so a test can act while a Sync is in its fsync.
type stallFS struct {
	OSFS
	armed   atomic.Bool
	entered chan struct{} // signalled when the stalled fsync started
	release chan struct{} // closed to let it finish
}

func newStallFS() *stallFS {
	return &stallFS{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (f *stallFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return &stallFile{File: file, fs: f}, nil
}

type stallFile struct {
	File
	fs *stallFS
}

func (f *stallFile) Sync() error {
	if f.fs.armed.CompareAndSwap(true, false) {
		f.fs.entered <- struct{}{}
		<-f.fs.release
	}
	return f.File.Sync()
}

// openStalled opens a log on a stallFS; the test's cleanup lets any held
// fsync go and closes it.
func openStalled(t *testing.T) (string, *Log, *stallFS) {
	t.Helper()
	dir := t.TempDir()
	sfs := newStallFS()
	l := mustOpen(t, dir, testConfig(sfs))
	t.Cleanup(func() {
		select {
		case <-sfs.release:
		default:
			close(sfs.release)
		}
		l.Close()
	})
	return dir, l, sfs
}

// syncInBackground starts l.Sync and waits until it is in its fsync.
func syncInBackground(t *testing.T, l *Log, sfs *stallFS) <-chan error {
	t.Helper()
	sfs.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- l.Sync() }()
	select {
	case <-sfs.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("Sync did not reach its fsync")
	}
	return done
}

// Appends go on while a Sync waits for its fsync (a partition's apply is
// never held up by a checkpoint), and the recovery point it records is the
// end the log had when it started: the appends made during the fsync stay
// unsynced until the next Sync.
func TestSyncDoesNotBlockAppends(t *testing.T) {
	dir, l, sfs := openStalled(t)
	mustAppend(t, l, simpleBatch(t, 3, 1, 10))
	done := syncInBackground(t, l, sfs)

	// simpleBatch may call t.Fatal, which only the test's goroutine may.
	batch := simpleBatch(t, 2, 2, 10)
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(batch, AppendOptions{})
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an append waited for another call's fsync")
	}
	close(sfs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rp, ok := readCheckpoint(l.fsys, dir, recoveryPointFile); !ok || rp != 3 {
		t.Fatalf("recovery point %d (found %v), want 3: the end when Sync began", rp, ok)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if rp, _ := readCheckpoint(l.fsys, dir, recoveryPointFile); rp != 5 {
		t.Fatalf("recovery point after the next Sync %d, want 5", rp)
	}
}

// A truncation during a Sync's fsync keeps the recovery point the
// truncation wrote: the end the Sync saw is gone.
func TestSyncAfterConcurrentTruncation(t *testing.T) {
	dir, l, sfs := openStalled(t)
	mustAppend(t, l, simpleBatch(t, 3, 1, 10))
	mustAppend(t, l, simpleBatch(t, 3, 2, 10))
	done := syncInBackground(t, l, sfs)
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	close(sfs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rp, _ := readCheckpoint(l.fsys, dir, recoveryPointFile); rp > 3 {
		t.Fatalf("recovery point %d past the truncated end 3", rp)
	}
}

// Syncs running beside appends that roll segments and create their index
// files lazily: a Sync fsyncs the files the active segment had when it
// began (run under -race, which saw a Sync read a segment's index file
// while the append that created it wrote it), and every Sync's recovery
// point is data the log holds.
func TestSyncBesideRollingAppends(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(OSFS{})
	cfg.SegmentBytes = 2048
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	const appends = 3000
	// Built here: simpleBatch may call t.Fatal, which only the test's
	// goroutine may.
	batches := make([][]byte, appends)
	for i := range batches {
		batches[i] = simpleBatch(t, 2, int64(i), 100)
	}
	appended := make(chan error, 1)
	go func() {
		for _, b := range batches {
			if _, err := l.Append(b, AppendOptions{}); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	for syncs := 0; ; syncs++ {
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-appended:
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if rp, _ := readCheckpoint(l.fsys, dir, recoveryPointFile); rp != 2*appends {
				t.Fatalf("recovery point %d after %d syncs, want %d", rp, syncs, 2*appends)
			}
			return
		default:
		}
	}
}
