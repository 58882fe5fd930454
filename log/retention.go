package log

import "fmt"

// DeleteRecordsBefore advances the log start offset (Kafka DeleteRecords).
// The new start is persisted before any file is removed, so a crash in
// between only leaves files that the next Open deletes. The active segment
// is kept even when wholly below the new start, as in Kafka.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if _, err := l.writable(); err != nil {
		return err
	}
	if offset < 0 || offset > l.end {
		return fmt.Errorf("%w: delete before %d, log end %d", ErrOffsetOutOfRange, offset, l.end)
	}
	if offset <= l.logStart {
		return nil
	}
	n := 0
	for n < len(l.segs)-1 && l.segs[n].next <= offset {
		n++
	}
	return l.deleteOldest(n, offset)
}

// EnforceRetention deletes whole segments past retention.ms (judged by the
// newest timestamp in the segment) and then oldest segments while the log
// exceeds retention.bytes. If the active segment itself must go it is
// rolled first, leaving an empty log with start == end.
func (l *Log) EnforceRetention() (removedSegments int, err error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	cfg, err := l.writable()
	if err != nil {
		return 0, err
	}
	nowMs := cfg.Now().UnixMilli()
	n := 0
	if cfg.RetentionMs >= 0 {
		// Segments with no timestamps at all (maxTs < 0) never expire by
		// time: Kafka would fall back to file mtime, which FS lacks.
		for n < len(l.segs) && l.segs[n].size > 0 && l.segs[n].maxTs >= 0 && nowMs-l.segs[n].maxTs > cfg.RetentionMs {
			n++
		}
	}
	if cfg.RetentionBytes >= 0 {
		excess := l.size - cfg.RetentionBytes
		for _, s := range l.segs[:n] {
			excess -= s.size
		}
		for n < len(l.segs) && l.segs[n].size > 0 && excess-l.segs[n].size >= 0 {
			excess -= l.segs[n].size
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	if n == len(l.segs) {
		if _, err := l.roll(cfg.IndexIntervalBytes); err != nil {
			return 0, err
		}
	}
	if err := l.deleteOldest(n, l.segs[n].base); err != nil {
		return 0, err
	}
	return n, nil
}

// deleteOldest persists newStart, drops the first n segments from the log
// and releases them; their files disappear once the last reader is done.
// Caller holds appendMu.
func (l *Log) deleteOldest(n int, newStart int64) error {
	newStart = max(newStart, l.logStart)
	if newStart != l.logStart {
		if err := writeCheckpoint(l.fsys, l.dir, logStartFile, newStart); err != nil {
			return fmt.Errorf("log: persist log start offset: %w", err)
		}
	}
	l.mu.Lock()
	dead := l.segs[:n:n]
	l.segs = append([]*segment(nil), l.segs[n:]...)
	l.logStart = newStart
	l.start.Store(newStart)
	for _, s := range dead {
		l.size -= s.size
	}
	l.mu.Unlock()
	// Renaming rather than leaving the unlink to the last reader: a later
	// Reset may create a segment with the same base offset while a reader
	// still holds this one (see segment.trash). No directory fsync is
	// needed: should the rename be lost in a crash, the segment lies below
	// the persisted log start and Open deletes it. If the rename fails the
	// last release unlinks the original names, as before.
	for _, s := range dead {
		s.trash()
		s.deleted.Store(true)
		s.release()
	}
	return nil
}
