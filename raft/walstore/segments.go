package walstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/weir-broker/weir/log"
)

const segSuffix = ".wal"

// segment is one file of the WAL. size and live are changed only by the
// writer, under Store.mu, so Stats and readers may look at them under
// RLock.
type segment struct {
	seq  uint32
	path string
	f    log.File
	size int64  // bytes written and synced, header included
	live int64  // bytes of records some group still needs
	salt uint32 // XORed into its records' CRCs (record.go)

	// refs counts the store's own reference (dropped when the segment
	// leaves the WAL) plus readers in a ReadAt; the file is closed at zero
	// so a reader never sees a closed file.
	refs atomic.Int32
	// readers counts GetLogs between finding a location here and
	// reading it: a spare is not reused under them (spares.go; the writer's
	// own reference, for dropcache.go, does not hold it back).
	readers atomic.Int32
}

func segName(seq uint32) string { return fmt.Sprintf("%020d%s", seq, segSuffix) }

// parseSegName returns the sequence of a segment file name.
func parseSegName(name string) (uint32, bool) {
	n, ok := parseNumbered(name, segSuffix, 32)
	return uint32(n), ok && n != 0
}

// parseNumbered returns the number of a file named as segName and
// spareName name them: 20 decimal digits, then suffix.
func parseNumbered(name, suffix string, bits int) (uint64, bool) {
	base, ok := strings.CutSuffix(name, suffix)
	if !ok || len(base) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, bits)
	return n, err == nil
}

func newSegment(seq uint32, path string, f log.File, size int64) *segment {
	sg := &segment{seq: seq, path: path, f: f, size: size}
	sg.refs.Store(1)
	return sg
}

func (sg *segment) acquire() { sg.refs.Add(1) }

// acquireRead and releaseRead bracket a reader's use of sg.
func (sg *segment) acquireRead() { sg.acquire(); sg.readers.Add(1) }

func (sg *segment) releaseRead() { sg.readers.Add(-1); sg.release() }

func (sg *segment) release() {
	if sg.refs.Add(-1) == 0 {
		sg.f.Close()
	}
}

// createSegment makes seq's file, from a spare if one is free, and writes
// its header (not yet synced: the first batch's Sync covers it, and the
// directory is synced before that batch is acknowledged).
func (s *Store) createSegment(seq uint32) (*segment, error) {
	path := filepath.Join(s.dir, segName(seq))
	f, err := s.reuseSpare(path)
	if f == nil && err == nil {
		f, err = s.fs.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("walstore: creating segment: %w", err)
	}
	if _, err := f.WriteAt(encodeSegHeader(uint64(seq)), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("walstore: writing header of %s: %w", path, err)
	}
	sg := newSegment(seq, path, f, segHeaderLen)
	sg.salt = segSalt(seq)
	return sg, nil
}

// syncDir makes creations and removals in the store's directory durable;
// POSIX offers no other way to persist a directory entry.
func (s *Store) syncDir() error {
	d, err := s.fs.OpenFile(s.dir, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("walstore: syncing directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("walstore: syncing directory: %w", err)
	}
	return nil
}

// segmentAt returns the segment with sequence seq. Callers hold mu.
func (s *Store) segmentAt(seq uint32) *segment {
	if len(s.segs) == 0 || seq < s.segs[0].seq {
		return nil
	}
	i := int(seq - s.segs[0].seq)
	if i >= len(s.segs) {
		return nil
	}
	return s.segs[i]
}

func (s *Store) activeSegment() *segment { return s.segs[len(s.segs)-1] }
