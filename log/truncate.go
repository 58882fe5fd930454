package log

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
)

// TruncateTo removes every batch whose base offset is >= offset, so that
// EndOffset becomes offset. offset must lie in [LogStartOffset, EndOffset]
// (else the error wraps ErrOffsetOutOfRange) and be a batch boundary: the
// base offset of a stored batch, or EndOffset itself, which is a no-op.
// The new end is durable when TruncateTo returns: a crash afterwards never
// brings removed batches back, and a crash during it leaves, after Open,
// either the old log or the truncated one.
//
// Readers in flight over removed or rewritten bytes start over (Read) or
// fail with ErrOffsetOutOfRange; they never return a mix of old and new
// bytes. An I/O failure after the in-memory log was cut is sticky
// (ErrLogFailed): memory and disk may then disagree until Open recovers.
func (l *Log) TruncateTo(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	cfg, err := l.writable()
	if err != nil {
		return err
	}
	// The writer is the only mutator, so reading segs/end without mu is safe.
	if offset < l.logStart || offset > l.end {
		return fmt.Errorf("%w: truncate to %d, log is [%d, %d]", ErrOffsetOutOfRange, offset, l.logStart, l.end)
	}
	if offset == l.end {
		return nil
	}
	i := l.segmentFor(offset)
	if i == len(l.segs) {
		return fmt.Errorf("log: truncate to %d: no segment holds it", offset) // unreachable: offset < end
	}
	k, s := i, l.segs[i]
	var cut segmentPrefix
	if offset == s.base && i > 0 {
		// Whole segments from offset on go; the previous segment stays
		// intact and becomes the active one.
		k, s = i-1, l.segs[i-1]
	} else if cut, err = s.prefixBefore(offset); err != nil {
		return err
	}
	inPlace := k == i
	wasSealed := k < len(l.segs)-1
	dead := slices.Clone(l.segs[k+1:])
	// Before the commit, so that Open never accepts a hole at or past
	// the new end (see lowerCleanedTo).
	if err := l.lowerCleanedTo(offset); err != nil {
		return err
	}

	// Readers see the cut before any byte changes on disk; those pinned
	// earlier notice the generation bump and start over.
	l.mu.Lock()
	if inPlace {
		s.gen.Add(1)
		s.idx.entries = slices.Clip(s.idx.entries[:cut.nIdx])
		s.tidx.entries = slices.Clip(s.tidx.entries[:cut.nTime])
		s.maxTs, s.offMaxTs, s.bytesSinceIndex = cut.maxTs, cut.offMaxTs, cut.bytesSince
		s.size, s.next = cut.pos, offset
	}
	for _, d := range dead {
		d.gen.Add(1)
	}
	l.segs = slices.Clip(l.segs[:k+1])
	l.end = offset
	l.unsynced = true
	l.cuts++
	l.size = 0
	for _, x := range l.segs {
		l.size += x.size
	}
	l.mu.Unlock()

	// On-disk order. The commit point is the first step that makes Open
	// see the new end; before it Open sees the old log, after it the new
	// one, never a prefix in between:
	//
	//  1. Cutting segment k (truncate + fsync) is the commit when the cut
	//     falls inside it: every later segment then starts past k's new
	//     end, and Open drops segments that do not continue the previous
	//     one. Its indexes are truncated too; a stale index that survives
	//     a crash fails the sanity check against the shorter .log (an
	//     entry beyond the file or beyond its last offset) and is rebuilt.
	//  2. Otherwise (offset is a segment base) renaming away the segment at
	//     offset is the commit, and it is made durable before any later
	//     segment is touched: were a later rename to persist alone, Open
	//     would keep the segment at offset and stop there, a state that is
	//     neither old nor new. Lowest first for the same reason when step 1
	//     already committed, where it is merely harmless.
	//  3. Removed segments are renamed rather than unlinked (see
	//     segment.trash), and the directory is fsynced before returning
	//     (the recovery point write below fsyncs it too, but its failure
	//     is not sticky): a stale segment file whose base offset the log
	//     later grows back to would otherwise pass Open's contiguity check
	//     and splice old batches onto new ones.
	//  4. The recovery point is rewritten last, to the new end, which is
	//     now fsynced. Until then it may lie past the new end; a crash
	//     then is harmless, since every segment but the last was fsynced
	//     when it was sealed and Open always scans the last. Left there,
	//     though, it would claim the refilled range synced.
	if wasSealed {
		// The segment is active again; its sealed entry count would no
		// longer hold once it grows.
		s.markTimeIndex(false)
	}
	if inPlace {
		if err := s.log.Truncate(cut.pos); err != nil {
			releaseAll(dead)
			return l.fail(fmt.Errorf("truncate segment %d: %w", s.base, err))
		}
		s.truncateIndexFiles(cut.nIdx, cut.nTime)
		if err := s.sync(); err != nil {
			releaseAll(dead)
			return l.fail(fmt.Errorf("fsync truncated segment %d: %w", s.base, err))
		}
	}
	if wasSealed {
		// A sealed segment loaded from its indexes never learnt its
		// segment.ms clock; use what Open would for an active segment.
		s.rollBase = s.firstBatchTime(cfg.Now().UnixMilli())
	}
	for j, d := range dead {
		if err := d.trash(); err != nil {
			// Leave the files where they are: Open decides.
			releaseAll(dead[j:])
			return l.fail(fmt.Errorf("remove segment %d: %w", d.base, err))
		}
		d.deleted.Store(true)
		d.release()
		if j == 0 || j == len(dead)-1 {
			if err := syncDir(l.fsys, l.dir); err != nil {
				releaseAll(dead[j+1:])
				return l.fail(fmt.Errorf("fsync %s: %w", l.dir, err))
			}
		}
	}
	if err := writeCheckpoint(l.fsys, l.dir, recoveryPointFile, offset); err != nil {
		return fmt.Errorf("log: write recovery point: %w", err)
	}
	return nil
}

// Reset discards all data: afterwards LogStartOffset == EndOffset ==
// startOffset, which may be below, inside or above the old range. The
// result is durable when Reset returns, and a crash during it leaves,
// after Open, either the old log or the reset one. Readers in flight start
// over (Read) or fail with ErrOffsetOutOfRange. Any I/O failure is sticky
// (ErrLogFailed); Open then completes or ignores the reset.
func (l *Log) Reset(startOffset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	cfg, err := l.writable()
	if err != nil {
		return err
	}
	if startOffset < 0 {
		return fmt.Errorf("%w: reset to negative offset %d", ErrOffsetOutOfRange, startOffset)
	}

	// On-disk order. No ordering of segment files and checkpoints alone
	// is atomic: the new segment's name may be an old segment's name, and
	// a new start inside the old range cannot be told apart from a
	// DeleteRecords. So the reset is committed by one durable file first
	// (reset-to, written atomically), and everything after it is redone
	// by Open should a crash or failure interrupt it:
	//
	//  1. reset-to = startOffset (commit). A failure here is sticky too:
	//     the rename may have become durable even if the fsync failed.
	//  2. old segments are renamed away (segment.trash): it frees their
	//     names for the new segment and keeps readers' files intact.
	//  3. the new empty segment is created and fsynced.
	//  4. log-start-offset then recovery-point = startOffset (each with a
	//     directory fsync, which also persists steps 2 and 3).
	//  5. reset-to is removed and the directory fsynced. Only now may the
	//     log be appended to: a marker surviving a later crash would make
	//     Open discard those appends.
	if err := l.lowerCleanedTo(startOffset); err != nil {
		return err
	}
	if err := writeCheckpoint(l.fsys, l.dir, resetFile, startOffset); err != nil {
		return l.fail(fmt.Errorf("write %s: %w", resetFile, err))
	}
	old := l.segs
	for _, s := range old {
		if err := s.trash(); err != nil {
			return l.fail(fmt.Errorf("remove segment %d: %w", s.base, err))
		}
	}
	seg, err := createSegment(l.fsys, l.dir, startOffset, cfg.Now().UnixMilli())
	if err != nil {
		return l.fail(fmt.Errorf("create segment %d: %w", startOffset, err))
	}
	l.mu.Lock()
	for _, s := range old {
		s.gen.Add(1)
	}
	l.segs = []*segment{seg}
	l.logStart, l.end, l.size = startOffset, startOffset, 0
	l.start.Store(startOffset)
	l.mu.Unlock()
	l.cuts++
	for _, s := range old {
		s.deleted.Store(true)
		s.release()
	}
	if err := seg.sync(); err != nil {
		return l.fail(fmt.Errorf("fsync segment %d: %w", startOffset, err))
	}
	for _, name := range []string{logStartFile, recoveryPointFile} {
		if err := writeCheckpoint(l.fsys, l.dir, name, startOffset); err != nil {
			return l.fail(fmt.Errorf("write %s: %w", name, err))
		}
	}
	if err := removeFileDurably(l.fsys, l.dir, resetFile); err != nil {
		return l.fail(fmt.Errorf("remove %s: %w", resetFile, err))
	}
	return nil
}

func releaseAll(segs []*segment) {
	for _, s := range segs {
		s.release()
	}
}

// segmentPrefix is a segment's state cut just before a batch boundary.
type segmentPrefix struct {
	pos             int64 // byte position of the first removed batch
	nIdx, nTime     int   // index entries that survive
	maxTs, offMaxTs int64
	bytesSince      int
}

// prefixBefore locates the batch starting at offset (base <= offset <
// next) and derives the segment state without it and its successors.
// Index entries are a prefix of the current ones; only the batches after
// the last surviving offset index entry are read, to find the cut and the
// largest timestamp: every earlier batch is covered by the surviving time
// index entries (an entry is written at each offset index entry whenever
// the largest timestamp grew). Caller holds appendMu.
func (s *segment) prefixBefore(offset int64) (segmentPrefix, error) {
	rel := offset - s.base
	es, tes := s.idx.entries, s.tidx.entries
	p := segmentPrefix{maxTs: -1, offMaxTs: -1}
	p.nIdx = sort.Search(len(es), func(i int) bool { return int64(es[i].rel) >= rel })
	p.nTime = sort.Search(len(tes), func(i int) bool { return int64(tes[i].rel) >= rel })
	if p.nTime > 0 {
		last := tes[p.nTime-1]
		p.maxTs, p.offMaxTs = last.ts, s.base+int64(last.rel)
	}
	var start int64
	if p.nIdx > 0 {
		start = int64(es[p.nIdx-1].pos)
	}
	sc := batchScanner{f: s.log, pos: start, limit: s.size, buf: scanBuffer(s.size - start)}
	for {
		h, pos, _, err := sc.next()
		if errors.Is(err, io.EOF) {
			return p, fmt.Errorf("log: truncate to %d: segment %d ends at %d", offset, s.base, s.next)
		}
		if err != nil {
			return p, fmt.Errorf("log: truncate to %d: read segment %d: %w", offset, s.base, err)
		}
		if h.BaseOffset == offset {
			p.pos = pos
			return p, nil
		}
		if h.LastOffset() >= offset {
			return p, fmt.Errorf("log: truncate to %d: not a batch boundary (batch %d-%d)", offset, h.BaseOffset, h.LastOffset())
		}
		if h.MaxTimestamp > p.maxTs {
			p.maxTs, p.offMaxTs = h.MaxTimestamp, h.BaseOffset
		}
		p.bytesSince += h.Size()
	}
}

// firstBatchTime is the segment.ms clock recovery gives an active segment:
// the first batch's maxTimestamp, or nowMs if it has none (or no batch).
func (s *segment) firstBatchTime(nowMs int64) int64 {
	if s.size < batchHeaderLen {
		return nowMs
	}
	hdr := make([]byte, batchHeaderLen)
	if err := readFull(s.log, hdr, 0); err != nil {
		return nowMs
	}
	if ts := parseHeader(hdr).MaxTimestamp; ts >= 0 {
		return ts
	}
	return nowMs
}

// truncateIndexFiles cuts both index files to their first nIdx and nTime
// entries. Like writeIndexes, a failure only marks the file broken.
func (s *segment) truncateIndexFiles(nIdx, nTime int) {
	if s.lazyIndexes {
		return // nothing written yet
	}
	if !s.idx.broken {
		if err := s.idx.f.Truncate(int64(indexHeaderLen + nIdx*indexEntryLen)); err != nil {
			s.idx.broken = true
		}
	}
	if !s.tidx.broken {
		if err := s.tidx.f.Truncate(int64(timeIndexHeaderLen + nTime*timeEntryLen)); err != nil {
			s.tidx.broken = true
		}
	}
}
