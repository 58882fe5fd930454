package log

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
)

// segment is one .log file plus its two index caches.
//
// Fields marked "published" are written only by the appender while holding
// Log.mu for writing and read by anyone holding Log.mu. Fields marked
// "writer" are touched only under Log.appendMu.
type segment struct {
	base int64
	fsys FS
	dir  string
	log  File
	idx  offsetIndex
	tidx timeIndex

	size     int64 // published: bytes of whole, readable batches
	next     int64 // published: offset after the last batch
	maxTs    int64 // published: largest batch maxTimestamp, -1 if none
	offMaxTs int64 // published: base offset of the first batch carrying maxTs

	bytesSinceIndex int   // writer
	rollBase        int64 // writer: ms of the first append, for SegmentMs
	rollJitter      int64 // writer: ms SegmentMs is shortened by (SegmentJitterMs)
	writtenBack     int64 // writer: bytes of the .log file whose writeback was started
	// lazyIndexes: the index files of a fresh segment are not created
	// until they get their first entry or the segment is sealed (writer),
	// as Kafka's lazy indexes: a topic of thousands of partitions that
	// are never written then costs one file per partition, not three.
	// Recovery makes missing index files again, like damaged ones.
	lazyIndexes bool

	// refs counts the Log's own reference plus in-flight readers; the files
	// are closed (and removed when deleted is set) when it reaches zero, so
	// deleting a segment never pulls a file out from under a reader.
	refs    atomic.Int32
	deleted atomic.Bool
	// trashed is set once the files were renamed to <name>.deleted; the
	// last release then removes those names.
	trashed atomic.Bool

	// gen is bumped, under Log.mu held for writing, before TruncateTo
	// changes the segment's bytes in place or before TruncateTo or Reset
	// drop it. A reader samples it when it pins the segment and rechecks it
	// after its I/O: a change means what it read may mix discarded and new
	// bytes, so it must start over. Appends never bump it: they only add
	// bytes past every pinned reader's limit.
	gen atomic.Uint64
}

func segmentName(dir string, base int64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}

const (
	extLog       = ".log"
	extIndex     = ".index"
	extTimeIndex = ".timeindex"
)

func newSegment(fsys FS, dir string, base int64) *segment {
	s := &segment{base: base, fsys: fsys, dir: dir, next: base, maxTs: -1, offMaxTs: -1}
	s.refs.Store(1)
	return s
}

// openFiles opens (creating if needed) the three files of a segment.
func (s *segment) openFiles(truncate bool) error {
	flag := os.O_RDWR | os.O_CREATE
	if truncate {
		flag |= os.O_TRUNC
	}
	var err error
	if s.log, err = s.fsys.OpenFile(segmentName(s.dir, s.base, extLog), flag, 0o644); err != nil {
		return err
	}
	if s.idx.f, err = openIndexFile(s.fsys, segmentName(s.dir, s.base, extIndex)); err != nil {
		s.closeFiles()
		return err
	}
	if s.tidx.f, err = openIndexFile(s.fsys, segmentName(s.dir, s.base, extTimeIndex)); err != nil {
		s.closeFiles()
		return err
	}
	return nil
}

// createSegment makes a fresh, empty segment on disk: its log file now,
// its index files when they are first needed (createIndexes).
func createSegment(fsys FS, dir string, base int64, nowMs int64) (*segment, error) {
	s := newSegment(fsys, dir, base)
	var err error
	if s.log, err = fsys.OpenFile(segmentName(dir, base, extLog), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
		return nil, err
	}
	s.lazyIndexes = true
	s.rollBase = nowMs
	return s, nil
}

// createIndexes makes a fresh segment's index files, empty. A failure
// only marks them broken, as any index write failure does: the data is
// in the log file and Open rebuilds the indexes. Caller holds
// Log.appendMu.
func (s *segment) createIndexes() {
	if !s.lazyIndexes {
		return
	}
	s.lazyIndexes = false
	var err error
	if s.idx.f, err = openIndexFile(s.fsys, segmentName(s.dir, s.base, extIndex)); err == nil {
		err = writeIndexFile(s.idx.f, offsetIndexMagc, nil)
	}
	if err != nil {
		s.idx.broken = true
	}
	if s.tidx.f, err = openIndexFile(s.fsys, segmentName(s.dir, s.base, extTimeIndex)); err == nil {
		err = writeTimeIndexFile(s.tidx.f, s.base, false, nil)
	}
	if err != nil {
		s.tidx.broken = true
	}
}

func (s *segment) acquire() { s.refs.Add(1) }

func (s *segment) release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	s.closeFiles()
	if s.deleted.Load() {
		s.removeFiles()
	}
}

func (s *segment) closeFiles() error {
	var first error
	for _, f := range []File{s.log, s.idx.f, s.tidx.f} {
		if f != nil {
			if err := f.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	// A failed index write left a gap or torn entry the sanity check might
	// not catch; removing the file forces a rebuild on the next Open.
	if s.idx.broken {
		s.fsys.Remove(segmentName(s.dir, s.base, extIndex))
	}
	if s.tidx.broken {
		s.fsys.Remove(segmentName(s.dir, s.base, extTimeIndex))
	}
	return first
}

func (s *segment) removeFiles() error {
	suffix := ""
	if s.trashed.Load() {
		suffix = deletedSuffix
	}
	var first error
	for _, ext := range []string{extLog, extIndex, extTimeIndex} {
		if err := s.fsys.Remove(segmentName(s.dir, s.base, ext) + suffix); err != nil && !os.IsNotExist(err) && first == nil {
			first = err
		}
	}
	return first
}

// deletedSuffix marks the files of a segment that left the log while
// readers may still hold it open. Open removes such files unread.
const deletedSuffix = ".deleted"

// trash renames the segment's files out of the segment namespace, .log
// first. Deleting by unlink alone is not enough once readers can delay the
// unlink past the moment the log reuses the name: Reset and TruncateTo may
// create a new segment with the same base offset, which a late unlink
// would then destroy, and a crash before the late unlink would let Open
// take the stale file for a live segment (and, were the log to grow back
// to its base offset, splice its old batches onto new ones). The rename
// itself becomes durable with the next directory fsync; the caller orders
// that fsync. Open file descriptors are unaffected, so readers in flight
// keep reading the old bytes.
func (s *segment) trash() error {
	for _, ext := range []string{extLog, extIndex, extTimeIndex} {
		name := segmentName(s.dir, s.base, ext)
		if err := s.fsys.Rename(name, name+deletedSuffix); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	s.trashed.Store(true)
	return nil
}

// stale reports whether the segment was truncated or dropped since a reader
// sampled gen (see segment.gen).
func (s *segment) stale(gen uint64) bool { return s.gen.Load() != gen }

// sync makes the segment's data and indexes durable. Caller holds
// Log.appendMu, under which an append may create the index files.
func (s *segment) sync() error { return syncFiles(s.files()) }

// files returns the segment's open files: its log and the index files
// created so far. Caller holds Log.appendMu; a Sync that fsyncs outside
// it takes them first (index files created later hold only entries of
// later appends).
func (s *segment) files() [3]File { return [3]File{s.log, s.idx.f, s.tidx.f} }

// syncFiles fsyncs fs, skipping files not created yet (nil), which hold
// nothing to make durable.
func syncFiles(fs [3]File) error {
	for _, f := range fs {
		if f == nil {
			continue
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// relOffsetFits reports whether offsets up to last can still be expressed
// as u32 deltas from the base in the index.
func (s *segment) relOffsetFits(last int64) bool { return last-s.base <= math.MaxUint32 }

// indexer decides where sparse index entries go. Append and rebuild share it
// so a rebuilt index is identical to the one written incrementally.
type indexer struct {
	base       int64
	interval   int
	bytesSince int
	maxTs      int64
	offMaxTs   int64
	lastTimeTs int64
	hasTime    bool
	idx        []indexEntry
	tim        []timeEntry
}

func (s *segment) newIndexer(interval int) indexer {
	x := indexer{base: s.base, interval: interval, bytesSince: s.bytesSinceIndex, maxTs: s.maxTs, offMaxTs: s.offMaxTs}
	if n := len(s.tidx.entries); n > 0 {
		x.lastTimeTs, x.hasTime = s.tidx.entries[n-1].ts, true
	}
	return x
}

func (x *indexer) add(h BatchHeader, pos int64) {
	if h.MaxTimestamp > x.maxTs {
		x.maxTs, x.offMaxTs = h.MaxTimestamp, h.BaseOffset
	}
	if x.bytesSince > x.interval {
		x.idx = append(x.idx, indexEntry{rel: uint32(h.BaseOffset - x.base), pos: uint32(pos)})
		x.maybeTime()
		x.bytesSince = 0
	}
	x.bytesSince += h.Size()
}

// maybeTime records the largest timestamp so far if it grew since the last
// time entry; also called on roll so a closed segment's maximum is indexed.
func (x *indexer) maybeTime() {
	if x.maxTs >= 0 && (!x.hasTime || x.maxTs > x.lastTimeTs) {
		x.tim = append(x.tim, timeEntry{ts: x.maxTs, rel: uint32(x.offMaxTs - x.base)})
		x.lastTimeTs, x.hasTime = x.maxTs, true
	}
}

// writeIndexes appends the indexer's new entries to the index files. A
// failure only marks the file broken: indexes are caches and the data
// write already succeeded.
func (s *segment) writeIndexes(x *indexer) {
	if len(x.idx) > 0 || len(x.tim) > 0 {
		s.createIndexes()
	}
	if len(x.idx) > 0 && !s.idx.broken {
		off := int64(indexHeaderLen + len(s.idx.entries)*indexEntryLen)
		if _, err := s.idx.f.WriteAt(encodeIndexEntries(nil, s.base, x.idx), off); err != nil {
			s.idx.broken = true
		}
	}
	if len(x.tim) > 0 && !s.tidx.broken {
		off := int64(timeIndexHeaderLen + len(s.tidx.entries)*timeEntryLen)
		if _, err := s.tidx.f.WriteAt(encodeTimeEntries(nil, s.base, x.tim), off); err != nil {
			s.tidx.broken = true
		}
	}
}

// markTimeIndex rewrites the time index header: sealed with the entries
// written so far (on roll), or not sealed (when TruncateTo makes a sealed
// segment active again). Like writeIndexes, a failure only marks the file
// broken. Caller holds Log.appendMu.
func (s *segment) markTimeIndex(sealed bool) {
	s.createIndexes()
	if s.tidx.broken {
		return
	}
	if _, err := s.tidx.f.WriteAt(timeIndexHeader(s.base, sealed, len(s.tidx.entries)), 0); err != nil {
		s.tidx.broken = true
	}
}

// publish makes the indexer's state visible; caller holds Log.mu for writing.
func (s *segment) publish(x *indexer, size, next int64) {
	s.idx.entries = append(s.idx.entries, x.idx...)
	s.tidx.entries = append(s.tidx.entries, x.tim...)
	s.maxTs, s.offMaxTs = x.maxTs, x.offMaxTs
	s.bytesSinceIndex = x.bytesSince
	s.size, s.next = size, next
}

// batchScanner walks batches in a byte range of a file, reading in chunks so
// that many small batches cost one syscall.
// scanBuffer is a batchScanner's first buffer for a scan of n bytes: 64
// KiB, or n when less. A replica opening recovers its log and rebuilds
// three tables with a scan each, mostly of empty or short logs, and a
// fixed 64 KiB was 576 MB of garbage for a broker opening 3,000 new
// replicas.
func scanBuffer(n int64) []byte {
	return make([]byte, min(max(n, 0), 64<<10))
}

type batchScanner struct {
	f      File
	pos    int64 // file position of the next batch
	limit  int64 // end of the range to scan
	whole  bool  // also load and CRC-check batch bodies
	buf    []byte
	bufOff int64
	bufLen int
}

// ensure makes buf hold [pos, pos+n).
func (sc *batchScanner) ensure(n int) error {
	if sc.pos >= sc.bufOff && sc.pos+int64(n) <= sc.bufOff+int64(sc.bufLen) {
		return nil
	}
	want := max(n, cap(sc.buf))
	if rem := sc.limit - sc.pos; int64(want) > rem {
		want = int(rem)
	}
	if want > cap(sc.buf) {
		sc.buf = make([]byte, want)
	}
	sc.buf = sc.buf[:cap(sc.buf)]
	if err := readFull(sc.f, sc.buf[:want], sc.pos); err != nil {
		sc.bufLen = 0
		return err
	}
	sc.bufOff, sc.bufLen = sc.pos, want
	return nil
}

// next returns the next batch header and its position. With whole set the
// batch bytes are returned too (valid until the next call). io.EOF marks a
// clean end; ErrCorruptBatch a torn or invalid batch at pos.
func (sc *batchScanner) next() (BatchHeader, int64, []byte, error) {
	pos := sc.pos
	if pos >= sc.limit {
		return BatchHeader{}, pos, nil, io.EOF
	}
	if rem := sc.limit - pos; rem < batchHeaderLen {
		return BatchHeader{}, pos, nil, fmt.Errorf("%w: partial batch header at position %d", ErrCorruptBatch, pos)
	}
	if err := sc.ensure(batchHeaderLen); err != nil {
		return BatchHeader{}, pos, nil, err
	}
	start := int(pos - sc.bufOff)
	h := parseHeader(sc.buf[start:])
	if err := checkFraming(h, int(min(sc.limit-pos, math.MaxInt32))); err != nil {
		return h, pos, nil, err
	}
	var body []byte
	if sc.whole {
		if err := sc.ensure(h.Size()); err != nil {
			return h, pos, nil, err
		}
		start = int(pos - sc.bufOff)
		body = sc.buf[start : start+h.Size()]
		if _, err := checkBatch(body); err != nil {
			return h, pos, nil, err
		}
	}
	sc.pos = pos + int64(h.Size())
	return h, pos, body, nil
}

// readFull is ReadAt that treats a short read as an error but accepts the
// io.EOF that os.File returns alongside a complete read at the end of file.
func readFull(f File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
