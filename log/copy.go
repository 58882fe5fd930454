package log

import (
	"fmt"
	"slices"
)

// Copying a compacted log.
//
// A replica that falls too far behind its leader copies the batches it
// lacks from the leader's log (a Raft snapshot catch-up, a wiped or new
// replica). Each replica compacts on its own, so the leader's log may
// have holes where its cleaner removed records: between batches, and at
// the end of the range copied. The copy keeps them: every batch lands at
// its own offset, and the log end is moved over a hole at the end with
// SkipTo. Holes are accepted only below the source's cleaner checkpoint,
// where the source's cleaner made them, and this log's checkpoint is
// raised to cover them before they are written, so Open accepts them
// after a crash. The copied section then counts as cleaned here too: it
// was deduplicated on the source.

// AppendCopied appends batches copied from a replica whose log was
// compacted (see copy.go): as AppendReplicated, except that a batch may
// start past the end of the one before it, or past EndOffset, where the
// source's cleaner removed records, provided every such gap ends at or
// below cleanBelow, the source's cleaner checkpoint.
func (l *Log) AppendCopied(records []byte, cleanBelow int64) (AppendResult, error) {
	hs, err := ValidateStored(records)
	if err != nil {
		return AppendResult{}, err
	}
	if len(hs) == 0 {
		return AppendResult{}, nil
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	gapsEnd := int64(-1) // where the last gap ends
	prevEnd := l.EndOffset()
	for i, h := range hs {
		switch {
		case h.BaseOffset < prevEnd:
			return AppendResult{}, fmt.Errorf("%w: copied batch %d starts at offset %d, before %d", ErrOffsetMismatch, i, h.BaseOffset, prevEnd)
		case h.BaseOffset > prevEnd && h.BaseOffset > cleanBelow:
			return AppendResult{}, fmt.Errorf("%w: copied batch %d starts at offset %d, leaving a gap from %d past the source's cleaned offset %d", ErrOffsetMismatch, i, h.BaseOffset, prevEnd, cleanBelow)
		case h.BaseOffset > prevEnd:
			gapsEnd = h.BaseOffset
		}
		prevEnd = h.LastOffset() + 1
	}
	if gapsEnd >= 0 {
		if err := l.raiseCleanedTo(min(cleanBelow, prevEnd)); err != nil {
			return AppendResult{}, err
		}
	}
	return l.appendBatches(records, hs, false, true, AppendOptions{})
}

// SkipTo moves the log end forward to offset over records the source's
// cleaner removed (offset <= cleanBelow, its cleaner checkpoint): the
// active segment is sealed and an empty one begins at offset, which is
// how a restart finds the end again. An empty active segment is replaced
// instead: the new one is made first, so a crash leaves one or both.
func (l *Log) SkipTo(offset, cleanBelow int64) error {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if end := l.EndOffset(); offset <= end {
		return nil
	} else if offset > cleanBelow {
		return fmt.Errorf("%w: skip from %d to %d past the source's cleaned offset %d", ErrOffsetMismatch, end, offset, cleanBelow)
	}
	if err := l.raiseCleanedTo(offset); err != nil {
		return err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	cfg, err := l.writable()
	if err != nil {
		return err
	}
	old := l.active()
	if old.size > 0 {
		l.end = offset // roll starts the new segment at the end
		if _, err := l.roll(cfg.IndexIntervalBytes); err != nil {
			return err
		}
		l.mu.Lock()
		l.unsynced = true
		l.mu.Unlock()
		return nil
	}
	s, err := createSegment(l.fsys, l.dir, offset, 0)
	if err != nil {
		return fmt.Errorf("log: skip to %d: %w", offset, err)
	}
	l.mu.Lock()
	l.segs = append(slices.Clip(l.segs[:len(l.segs)-1]), s)
	l.end = offset
	l.unsynced = true
	l.mu.Unlock()
	old.gen.Add(1)
	if err := old.trash(); err != nil {
		old.release()
		return l.fail(fmt.Errorf("remove empty segment %d: %w", old.base, err))
	}
	old.deleted.Store(true)
	old.release()
	if err := syncDir(l.fsys, l.dir); err != nil {
		return l.fail(fmt.Errorf("skip to %d: %w", offset, err))
	}
	return nil
}

// raiseCleanedTo advances the cleaner checkpoint, durably, to offset;
// cleanMu is held.
func (l *Log) raiseCleanedTo(offset int64) error {
	l.mu.RLock()
	cur := l.cleanedTo
	l.mu.RUnlock()
	if offset <= cur {
		return nil
	}
	return l.setCleanedTo(offset)
}
