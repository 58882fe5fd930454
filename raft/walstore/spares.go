package walstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/weir-broker/weir/log"
)

// A new segment is made from a spare: a file whose blocks are already
// allocated and written, so that the segment's writes overwrite them in
// place. An O_DIRECT write and its fsync then cost the write and the
// device's cache flush; written past the end of the file, they also have
// the file system allocate blocks, grow the file and make that metadata
// durable (ext4 without a journal writes it out, as on this project's
// benchmark machine; with one, it commits the journal, which in ordered
// mode first writes out other files' newly allocated data). There, a
// 16 KiB write and fsync took 97 µs overwriting and 153 µs appending,
// 4 MiB 1.1 against 2.2 ms.
//
// Spares come from two places. The WAL's oldest segment, once nothing in
// it is live, becomes one instead of being deleted (up to maxSpares). And
// when there is none once the active segment is half full, prepareLoop
// fills a new file with zeros in the background, ahead of the next roll
// (Options.PrepareSpares), as PostgreSQL does with its WAL (wal_recycle,
// wal_init_zero). What a reused file held before stays past the new
// segment's records, which record.go's salt keeps replay from reading.
const (
	spareSuffix = ".spare"
	// maxSpares is how many emptied segments are kept for reuse; a roll
	// takes one and the next deletion gives one back.
	maxSpares = 2
	// zeroChunk is one write of a spare's zero fill.
	zeroChunk = 1 << 20
	// zeroFillPaysBelow is the average write to a segment below which
	// writing it as zeros first costs the disk less than it saves. The
	// zeros are one more sequential write of the segment (64 MiB: 40 ms
	// on this project's benchmark machine); overwriting saves about half
	// of each write and fsync (56 µs of 153 for 16 KiB, 1.1 of 2.2 ms for
	// 4 MiB), so 4,096 writes of 16 KiB save 230 ms and 16 of 4 MiB 18 ms.
	// Where the writes are that large, the disk is busy with throughput,
	// and the zeros would take it from the log itself.
	zeroFillPaysBelow = 1 << 20
	// zeroFillPause is how many times a chunk's write the zero fill waits
	// after it, so that the fill takes at most a quarter of the disk's
	// time while the WAL is being written. Unpaced, the fill's 64 MiB
	// went to the disk back to back and the WAL's writes and fsyncs
	// queued behind them: a Java producer at a fixed 20 MB/s saw its
	// worst latency in each 5 s window at 122–188 ms, one stall per
	// segment, against 9–19 ms paced. A spare not ready when the segment
	// rolls leaves the roll to create an empty segment, as it does
	// without one.
	zeroFillPause = 3
)

// spare is a file out of the WAL, kept to become a new segment.
type spare struct {
	path string
	was  *segment // the segment it was, if any: reused once no reader is in it
}

func spareName(n uint64) string { return fmt.Sprintf("%020d%s", n, spareSuffix) }

func parseSpareName(name string) (uint64, bool) { return parseNumbered(name, spareSuffix, 64) }

// nextSpareName returns a spare name not used yet. Callers hold spareMu.
func (s *Store) nextSpareName() string {
	s.spareSeq++
	return filepath.Join(s.dir, spareName(s.spareSeq))
}

// keepSpare takes a spare found by Open, or removes it if there are
// enough.
func (s *Store) keepSpare(name string, n uint64) error {
	path := filepath.Join(s.dir, name)
	s.spareSeq = max(s.spareSeq, n)
	if len(s.spares) < maxSpares {
		s.spares = append(s.spares, spare{path: path})
		return nil
	}
	if err := s.fs.Remove(path); err != nil {
		return fmt.Errorf("walstore: removing %s: %w", path, err)
	}
	return nil
}

// reuseSpare renames a spare no reader is still in to path and opens it;
// nil without an error when there is none, or when the rename fails (the
// segment is then created empty, and the spare forgotten until the next
// Open). Writer only.
func (s *Store) reuseSpare(path string) (log.File, error) {
	s.spareMu.Lock()
	i := slices.IndexFunc(s.spares, func(sp spare) bool { return sp.was == nil || sp.was.readers.Load() == 0 })
	if i < 0 {
		s.spareMu.Unlock()
		return nil, nil
	}
	sp := s.spares[i]
	s.spares = slices.Delete(s.spares, i, i+1)
	s.spareMu.Unlock()
	if err := s.fs.Rename(sp.path, path); err != nil {
		s.logger.Warn("walstore: reusing a spare segment failed", "file", sp.path, "error", err)
		return nil, nil
	}
	s.reusedSpares.Add(1)
	return s.fs.OpenFile(path, os.O_RDWR, 0)
}

// retire takes sg, out of the WAL and with nothing live, as a spare if
// there are fewer than maxSpares, and deletes it otherwise. The caller
// fsyncs the directory. Writer only.
func (s *Store) retire(sg *segment) (kept bool, err error) {
	s.spareMu.Lock()
	defer s.spareMu.Unlock()
	if len(s.spares) >= maxSpares {
		return false, s.fs.Remove(sg.path)
	}
	sp := spare{path: s.nextSpareName(), was: sg}
	if err := s.fs.Rename(sg.path, sp.path); err != nil {
		return false, err
	}
	s.spares = append(s.spares, sp)
	return true, nil
}

func (s *Store) spareCount() int {
	s.spareMu.Lock()
	defer s.spareMu.Unlock()
	return len(s.spares)
}

// askForSpare wakes prepareLoop once the active segment is half full, so
// that a spare is ready by the time it rolls, if its writes were small
// enough for the zeros to pay (zeroFillPaysBelow); a broker whose log
// never gets that far (an idle one, a test's) writes no zeros. Writer
// only.
func (s *Store) askForSpare() {
	if s.prepStopped == nil || s.prepAsked || s.wend < s.segBytes/2 {
		return
	}
	s.prepAsked = true
	if int64(s.segWrites)*zeroFillPaysBelow < s.wend {
		return
	}
	select {
	case s.prepWake <- struct{}{}:
	default:
	}
}

// prepareLoop makes a spare when asked and there is none: a new file of
// SegmentBytes zeros, written a chunk at a time, bypassing the page cache
// where the file system allows, and fsynced. A failure is logged and
// tried again at the next segment; the roll itself never waits, and
// without a spare creates its segment as an empty file.
func (s *Store) prepareLoop() {
	defer close(s.prepStopped)
	var zeros []byte
	for {
		select {
		case <-s.prepWake:
		case <-s.prepStop:
			return
		}
		if s.spareCount() > 0 {
			continue
		}
		if zeros == nil {
			zeros = alignedSlice(zeroChunk)
		}
		s.spareMu.Lock()
		path := s.nextSpareName()
		s.spareMu.Unlock()
		if err := s.zeroFill(path, zeros); err != nil {
			if !errors.Is(err, errStopped) {
				s.logger.Warn("walstore: preparing a spare segment failed", "file", path, "error", err)
			}
			_ = s.fs.Remove(path)
			continue
		}
		s.spareMu.Lock()
		s.spares = append(s.spares, spare{path: path})
		s.spareMu.Unlock()
		s.preparedSpares.Add(1)
	}
}

var errStopped = errors.New("walstore: store closing")

// zeroFill creates path and writes SegmentBytes of zeros to it, a chunk
// at a time with a pause after each (zeroFillPause).
func (s *Store) zeroFill(path string, zeros []byte) error {
	flag := os.O_CREATE | os.O_EXCL | os.O_WRONLY
	_, osfs := s.fs.(log.OSFS)
	if osfs && oDirect != 0 {
		flag |= oDirect
	}
	f, err := s.fs.OpenFile(path, flag, 0o644)
	if err != nil && flag&oDirect != 0 {
		flag &^= oDirect
		f, err = s.fs.OpenFile(path, flag, 0o644)
	}
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	size := (s.segBytes + directAlign - 1) &^ (directAlign - 1)
	for off := int64(0); off < size; off += zeroChunk {
		select {
		case <-s.prepStop:
			return errStopped
		default:
		}
		chunk := zeros[:min(zeroChunk, size-off)]
		start := time.Now()
		_, err := f.WriteAt(chunk, off)
		if flag&oDirect != 0 && errors.Is(err, syscall.EINVAL) {
			// An alignment this device does not take: buffered from here.
			f.Close()
			if f, err = s.fs.OpenFile(path, os.O_WRONLY, 0); err != nil {
				return err
			}
			flag &^= oDirect
			_, err = f.WriteAt(chunk, off)
		}
		if err != nil {
			return err
		}
		if !s.fillPause(zeroFillPause * time.Since(start)) {
			return errStopped
		}
	}
	return f.Sync()
}

// pauseFill waits d between two chunks of a zero fill; false if the store
// began closing meanwhile.
func (s *Store) pauseFill(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.prepStop:
		return false
	}
}
