package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Checkpoint files in the partition directory. Both are small text files
// replaced atomically (temp file, fsync, rename, dir fsync):
//
//	line 1: format version, currently "0"
//	line 2: offset, decimal
//
// recovery-point:   every batch below this offset was fsynced; Open
//
//	validates only segments that may hold data at or above it.
//
// log-start-offset: first offset visible to consumers, advanced by
//
//	DeleteRecordsBefore and retention (and set by Reset);
//	segments wholly below it are deleted on Open.
//
// reset-to:         present only while Reset runs (or after a crash or
//
//	storage failure during it): Reset's commit record. Open
//	finishes the reset: it removes every segment, restarts the
//	log empty at this offset and then removes the file.
//
// cleaner-checkpoint: the first dirty offset: every record below it was
//
//	deduplicated by a clean pass. Offsets below it may have holes
//	(see continues). Missing means 0; unreadable fails Open.
//
// clean-swap:       present only while a clean pass swaps its segments
//
//	in (format in clean.go): the swap's commit record. Open
//	finishes the swap before it lists the segments.
const (
	recoveryPointFile = "recovery-point"
	logStartFile      = "log-start-offset"
	resetFile         = "reset-to"
	checkpointVersion = "0"

	recoveryChunk = 1 << 20
)

func writeCheckpoint(fsys FS, dir, name string, offset int64) error {
	data := checkpointVersion + "\n" + strconv.FormatInt(offset, 10) + "\n"
	return WriteFileAtomic(fsys, filepath.Join(dir, name), []byte(data))
}

// readCheckpoint returns ok=false for a missing or unreadable file; the
// caller then falls back to the conservative choice (validate everything).
func readCheckpoint(fsys FS, dir, name string) (int64, bool) {
	b, err := readFile(fsys, filepath.Join(dir, name))
	if err != nil {
		return 0, false
	}
	return parseCheckpoint(b)
}

// readResetMarker reports a pending Reset. Unlike the other checkpoints
// there is no conservative fallback for an unreadable marker: ignoring it
// could resurrect discarded data and guessing could discard live data, so
// that fails Open.
func readResetMarker(fsys FS, dir string) (int64, bool, error) {
	b, err := readFile(fsys, filepath.Join(dir, resetFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", resetFile, err)
	}
	v, ok := parseCheckpoint(b)
	if !ok {
		return 0, false, fmt.Errorf("unreadable %s: %q", resetFile, b)
	}
	return v, true, nil
}

// readCleanerCheckpoint returns the cleaner checkpoint, 0 when there is
// none. An unreadable one fails Open: taken as 0 it would make Open cut a
// cleaned log at its first hole, and no other value is safe to guess.
func readCleanerCheckpoint(fsys FS, dir string) (int64, error) {
	b, err := readFile(fsys, filepath.Join(dir, cleanerCheckpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", cleanerCheckpointFile, err)
	}
	v, ok := parseCheckpoint(b)
	if !ok {
		return 0, fmt.Errorf("unreadable %s: %q", cleanerCheckpointFile, b)
	}
	return v, nil
}

// parseCheckpoint reads a checkpoint file. Its final newline is required:
// a file cut short inside its number would otherwise read as a smaller one.
func parseCheckpoint(b []byte) (int64, bool) {
	if !bytes.HasSuffix(b, []byte("\n")) {
		return 0, false
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != checkpointVersion {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(lines[1]), 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// listSegments returns the base offsets of the .log files in dir and cleans
// up leftovers: temp files and index files without a log.
func listSegments(fsys FS, dir string) ([]int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	have := map[int64]bool{}
	var orphans []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, cleanedSuffix) {
			// Half-written checkpoints, files of segments that had
			// left the log before the crash (see segment.trash), and
			// of cleaned segments whose swap never committed (a
			// committed one was finished before this).
			fsys.Remove(filepath.Join(dir, name))
			continue
		}
		ext := filepath.Ext(name)
		base, err := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64)
		if err != nil || len(name)-len(ext) != 20 {
			continue
		}
		switch ext {
		case extLog:
			bases = append(bases, base)
			have[base] = true
		case extIndex, extTimeIndex:
			orphans = append(orphans, name)
		}
	}
	for _, name := range orphans {
		ext := filepath.Ext(name)
		base, _ := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64)
		if !have[base] {
			fsys.Remove(filepath.Join(dir, name))
		}
	}
	slices.Sort(bases)
	return bases, nil
}

// recover rebuilds the in-memory state from disk. Segments that may hold
// data past the recovery point are scanned batch by batch (framing, magic,
// CRC, offsets continuing without a gap, none reaching the next segment's
// base) and truncated at the first bad batch; a crash can tear only the
// unsynced tail. Every later segment then no longer continues the log and
// is dropped, unless what was cut held no batch of this segment. Older
// segments trust their indexes if they pass a sanity check and are
// rescanned otherwise.
func (l *Log) recover() error {
	lg := l.cfg.Logger.With("dir", l.dir)
	if finished, err := finishCleanSwap(l.fsys, l.dir); err != nil {
		return err
	} else if finished {
		lg.Warn("finished interrupted clean swap")
	}
	cleanedTo, err := readCleanerCheckpoint(l.fsys, l.dir)
	if err != nil {
		return err
	}
	l.cleanedTo = cleanedTo
	bases, err := listSegments(l.fsys, l.dir)
	if err != nil {
		return err
	}
	logStart, _ := readCheckpoint(l.fsys, l.dir, logStartFile)
	rp, hasRP := readCheckpoint(l.fsys, l.dir, recoveryPointFile)
	if !hasRP {
		rp = 0
	}
	resetTo, resetting, err := readResetMarker(l.fsys, l.dir)
	if err != nil {
		return err
	}
	if resetting {
		lg.Warn("finishing interrupted reset", "start_offset", resetTo)
		if err := l.redoReset(bases, resetTo); err != nil {
			return err
		}
		bases, logStart = nil, resetTo
	}
	// A crash after advancing the log start but before deleting files
	// leaves segments wholly below it.
	for len(bases) > 1 && bases[1] <= logStart {
		newSegment(l.fsys, l.dir, bases[0]).removeFiles()
		bases = bases[1:]
	}

	nowMs := l.cfg.Now().UnixMilli()
	dirty, err := l.openSegments(lg, bases, rp, nowMs)
	if err != nil {
		return err
	}

	// fresh: nothing was here (a new partition). Its empty segment needs
	// no fsync and no recovery point: should a crash lose the new files,
	// the next Open makes them again, and an absent recovery point means
	// offset 0, where the log is.
	fresh := len(l.segs) == 0 && logStart == 0 && !resetting
	if len(l.segs) == 0 || l.active().next < logStart {
		// Everything left is below the log start (data lost in a crash
		// after DeleteRecords); restart empty at the start offset.
		for _, s := range l.segs {
			s.deleted.Store(true)
			s.release()
		}
		s, err := createSegment(l.fsys, l.dir, logStart, nowMs)
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
		if !fresh {
			dirty = append(dirty, s)
		}
	}
	l.logStart = max(logStart, l.segs[0].base)
	l.start.Store(l.logStart)
	l.end = l.active().next
	// Whatever was found may be only in the page cache; an empty log at
	// offset 0 (a new one) has nothing to make durable.
	l.unsynced = l.end != 0 || l.logStart != 0
	for _, s := range l.segs {
		l.size += s.size
	}
	if l.logStart != logStart {
		if err := writeCheckpoint(l.fsys, l.dir, logStartFile, l.logStart); err != nil {
			return err
		}
	}
	if l.cleanedTo > l.end {
		// The log lost what a clean had covered; holes are accepted
		// only where the log still has them.
		if err := writeCheckpoint(l.fsys, l.dir, cleanerCheckpointFile, l.end); err != nil {
			return err
		}
		l.cleanedTo = l.end
	}
	// Truncations and rebuilt indexes become durable before the recovery
	// point moves past them.
	for _, s := range dirty {
		if s.refs.Load() > 0 && !s.deleted.Load() {
			if err := s.sync(); err != nil {
				return err
			}
		}
	}
	if fresh {
		return nil
	}
	if err := writeCheckpoint(l.fsys, l.dir, recoveryPointFile, l.end); err != nil {
		return err
	}
	if resetting {
		// Only once the empty segment and both checkpoints are durable:
		// a crash before this point redoes the reset, after it the log
		// is the reset one.
		if err := removeFileDurably(l.fsys, l.dir, resetFile); err != nil {
			return err
		}
	}
	return nil
}

// redoReset finishes a Reset that committed (its marker is on disk) but
// may not have finished: the segments may be old ones, the new empty one
// or both, and none of them holds anything the reset log keeps. The log
// start is persisted before the marker goes (recover), like Reset does.
func (l *Log) redoReset(bases []int64, resetTo int64) error {
	for _, b := range bases {
		if err := newSegment(l.fsys, l.dir, b).removeFiles(); err != nil {
			return err
		}
	}
	return writeCheckpoint(l.fsys, l.dir, logStartFile, resetTo)
}

// openSegments opens the segments at bases into l.segs, in order,
// validating (and rebuilding the indexes of) the active one and every
// one past the recovery point rp, and returns the ones it rewrote: only
// those need an fsync before the recovery point moves (syncing every
// sealed segment would make Open O(log)).
func (l *Log) openSegments(lg *slog.Logger, bases []int64, rp, nowMs int64) ([]*segment, error) {
	var dirty []*segment
	for i, base := range bases {
		if i > 0 && !continues(l.segs[i-1].next, base, l.cleanedTo) {
			// Offsets must be contiguous across segments: the previous
			// segment lost its tail (a torn or damaged batch), or this
			// one outlived a truncation. Segments after a gap are never
			// part of the log, intact or not.
			lg.Warn("segment does not continue the previous one; dropping it and later segments",
				"segment", base, "expected", l.segs[i-1].next)
			for _, b := range bases[i:] {
				newSegment(l.fsys, l.dir, b).removeFiles()
			}
			break
		}
		s := newSegment(l.fsys, l.dir, base)
		if err := s.openFiles(false); err != nil {
			return nil, err
		}
		l.segs = append(l.segs, s)
		st, err := s.log.Stat()
		if err != nil {
			return nil, err
		}
		last := i == len(bases)-1
		end := int64(-1) // where the next segment begins
		if !last {
			end = bases[i+1]
		}
		scan := last || bases[i+1] > rp
		if !scan {
			if err := s.loadIndexes(st.Size(), end, l.cleanedTo); err != nil {
				lg.Warn("rebuilding segment indexes", "segment", base, "reason", err)
				scan = true
			}
		}
		if scan {
			truncated, err := s.scanAndRebuild(st.Size(), l.cfg.IndexIntervalBytes, end, nowMs, l.cleanedTo)
			if err != nil {
				return nil, err
			}
			dirty = append(dirty, s)
			if truncated {
				// Later segments stay only if this one still ends
				// where the next begins: then what was cut held no
				// batch (garbage after the last one), and nothing
				// that follows depends on it.
				lg.Warn("truncated corrupt or torn log tail", "segment", base, "valid_bytes", s.size, "file_bytes", st.Size())
			}
		}
	}
	return dirty, nil
}

// loadIndexes trusts a sealed segment's index files after a sanity check,
// then walks the few batches after the last index entry to learn the
// segment's largest timestamp. end is the next segment's base offset: the
// log keeps segments contiguous, so a sealed segment that does not end
// exactly there holds bytes that are not its own, such as a well-framed
// batch appended by damage, which only a full scan can tell from the rest.
func (s *segment) loadIndexes(size, end, holesBelow int64) error {
	b, err := readFile(s.fsys, segmentName(s.dir, s.base, extIndex))
	if err != nil {
		return err
	}
	es, err := loadOffsetIndex(b, s.base, size)
	if err != nil {
		return err
	}
	var start int64
	wantBase := s.base
	if n := len(es); n > 0 {
		start, wantBase = int64(es[n-1].pos), s.base+int64(es[n-1].rel)
	}
	sc := batchScanner{f: s.log, pos: start, limit: size, buf: scanBuffer(size - start)}
	next, maxTs, offMaxTs := s.base, int64(-1), int64(-1)
	for first := true; ; first = false {
		h, _, _, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if first && (h.BaseOffset != wantBase && (len(es) > 0 || !continues(wantBase, h.BaseOffset, holesBelow))) {
			return fmt.Errorf("%w: last entry points at offset %d, want %d", errInsaneIndex, h.BaseOffset, wantBase)
		}
		if !first && !continues(next, h.BaseOffset, holesBelow) {
			return fmt.Errorf("%w: batch at offset %d follows one ending at %d", errInsaneIndex, h.BaseOffset, next-1)
		}
		if h.MaxTimestamp > maxTs {
			maxTs, offMaxTs = h.MaxTimestamp, h.BaseOffset
		}
		next = h.LastOffset() + 1
	}
	// A sealed segment is empty only where the cleaner removed every
	// batch of it (it keeps the segment, and so the log start).
	if size == 0 && end > holesBelow || !s.relOffsetFits(next-1) {
		return fmt.Errorf("%w: empty or oversized sealed segment", errInsaneIndex)
	}
	if !continues(next, end, holesBelow) {
		return fmt.Errorf("%w: sealed segment ends at offset %d, the next one starts at %d", errInsaneIndex, next, end)
	}
	tb, err := readFile(s.fsys, segmentName(s.dir, s.base, extTimeIndex))
	if err != nil {
		return err
	}
	tes, err := loadTimeIndex(tb, s.base, uint32(next-1-s.base))
	if err != nil {
		return err
	}
	if n := len(tes); n > 0 && tes[n-1].ts >= maxTs {
		maxTs, offMaxTs = tes[n-1].ts, s.base+int64(tes[n-1].rel)
	}
	s.idx.entries, s.tidx.entries = es, tes
	s.size, s.next, s.maxTs, s.offMaxTs = size, next, maxTs, offMaxTs
	return nil
}

// scanAndRebuild validates every batch of the segment, truncates the file at
// the first bad one and rewrites both indexes from what survived. end is
// the next segment's base offset, or -1 for the last segment. Every
// operation keeps segments contiguous, so a segment never holds offsets at
// or past the next one's base: a batch there, even a valid one, is damage
// (a stray copy appended), and cutting it keeps the next segment.
func (s *segment) scanAndRebuild(size int64, interval int, end, nowMs, holesBelow int64) (truncated bool, err error) {
	sealed := end >= 0
	sc := batchScanner{f: s.log, limit: size, whole: true, buf: make([]byte, min(size, recoveryChunk))}
	x := indexer{base: s.base, interval: interval, maxTs: -1, offMaxTs: -1}
	next := s.base
	s.rollBase = nowMs
	for {
		h, pos, _, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, ErrCorruptBatch) {
			break
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return false, err
		}
		// The log never leaves gaps between batches (but for the
		// cleaner's holes below holesBelow), and baseOffset is the one
		// header field the CRC does not cover: a batch that does not
		// continue its predecessor is damaged, even with a valid CRC.
		if err != nil || !continues(next, h.BaseOffset, holesBelow) || !s.relOffsetFits(h.LastOffset()) || (sealed && h.LastOffset() >= end) {
			break
		}
		if pos == 0 && h.MaxTimestamp >= 0 {
			// Kafka's segment.ms clock: the first batch's timestamp.
			s.rollBase = h.MaxTimestamp
		}
		x.add(h, pos)
		next = h.LastOffset() + 1
		s.size = sc.pos
	}
	if s.size < size {
		if err := s.log.Truncate(s.size); err != nil {
			return false, err
		}
		truncated = true
	}
	if sealed {
		x.maybeTime()
	}
	if err := writeIndexFile(s.idx.f, offsetIndexMagc, encodeIndexEntries(nil, s.base, x.idx)); err != nil {
		s.idx.broken = true
	}
	if err := writeTimeIndexFile(s.tidx.f, s.base, sealed, x.tim); err != nil {
		s.tidx.broken = true
	}
	s.idx.entries, s.tidx.entries = x.idx, x.tim
	s.next, s.maxTs, s.offMaxTs, s.bytesSinceIndex = next, x.maxTs, x.offMaxTs, x.bytesSince
	return truncated, nil
}

// continues reports whether a batch or segment starting at base may follow
// one that ended just before next. The log never leaves gaps, except
// where the cleaner removed batches: below the cleaner checkpoint
// holesBelow a gap is accepted (base strictly past next, the whole gap
// below the checkpoint). Everywhere else a batch that does not continue
// its predecessor is damage, or a segment that outlived a truncation.
func continues(next, base, holesBelow int64) bool {
	return base == next || (base > next && base <= holesBelow)
}
