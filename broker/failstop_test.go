package broker

import (
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
)

// failingFS fails writes and fsyncs of files under paths containing
// match while broken is set.
type failingFS struct {
	log.OSFS
	match  string
	broken atomic.Bool
}

func (f *failingFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, f.match) {
		return file, err
	}
	return &failingFile{File: file, fs: f}, nil
}

type failingFile struct {
	log.File
	fs *failingFS
}

var errInjected = errors.New("injected I/O error")

func (f *failingFile) WriteAt(b []byte, off int64) (int, error) {
	if f.fs.broken.Load() {
		return 0, errInjected
	}
	return f.File.WriteAt(b, off)
}

func (f *failingFile) Sync() error {
	if f.fs.broken.Load() {
		return errInjected
	}
	return f.File.Sync()
}

// A replica whose log write fails stops acknowledging writes (fail-stop)
// even once the disk works again: its log may no longer match the group.
// Other partitions are unaffected.
func TestFailedWriteStopsAcknowledging(t *testing.T) {
	ffs := &failingFS{match: "/doomed-"}
	b, err := Open(Options{Node: testNode(t.TempDir()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LogFS: ffs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mustCreate(t, b, "doomed", 1, nil)
	mustCreate(t, b, "healthy", 1, nil)
	produceBatch(t, b, "doomed", 0, logtest.Batch{Records: 2})

	ffs.broken.Store(true)
	_, err = b.Produce(t.Context(), "doomed", 0, logtest.Batch{Records: 2}.Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.KafkaStorageError)
	ffs.broken.Store(false)
	_, err = b.Produce(t.Context(), "doomed", 0, logtest.Batch{Records: 2}.Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.KafkaStorageError)
	if got := b.Topic("doomed").Partition(0).HighWatermark(); got != 2 {
		t.Fatalf("high watermark %d after failed writes, want 2", got)
	}
	if got := produceBatch(t, b, "healthy", 0, logtest.Batch{Records: 1}); got != 0 {
		t.Fatalf("healthy partition offset %d, want 0", got)
	}
}

// A replica's Raft checkpoint goes through the log's FS like the log
// itself: a checkpoint that cannot be made durable fail-stops the replica
// instead of leaving it to replay its Raft log over records it already
// holds after a crash (pinBase writes one before the first entry).
func TestFailedCheckpointStopsAcknowledging(t *testing.T) {
	ffs := &failingFS{match: "raft-checkpoint"}
	ffs.broken.Store(true)
	b, err := Open(Options{Node: testNode(t.TempDir()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LogFS: ffs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mustCreate(t, b, "unpinned", 1, nil)
	_, err = b.Produce(t.Context(), "unpinned", 0, logtest.Batch{Records: 2}.Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.KafkaStorageError)
}
