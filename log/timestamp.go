package log

import (
	"errors"
	"io"
)

// tsSpan is a segment pinned for a timestamp search.
type tsSpan struct {
	s          *segment
	pos, limit int64
	maxTs      int64
	gen        uint64
}

// OffsetForTimestamp finds the first record (in offset order, at or after
// the log start) whose timestamp is >= ts, as ListOffsets does. Compressed
// batches are decompressed to find the exact record.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	for range maxReadAttempts {
		offset, timestamp, ok, err = l.offsetForTimestamp(ts)
		if err != errStale {
			return offset, timestamp, ok, err
		}
	}
	return 0, 0, false, staleErr("timestamp lookup", ts)
}

func (l *Log) offsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, 0, false, ErrClosed
	}
	start := l.logStart
	var spans []tsSpan
	for i := l.segmentFor(start); i < len(l.segs); i++ {
		s := l.segs[i]
		if s.maxTs < ts || s.size == 0 {
			continue
		}
		// Start at whichever is later: the time index hint or the log
		// start; both are lower bounds for the answer.
		rel, _ := lookupTime(s.tidx.entries, ts)
		if start > s.base {
			rel = max(rel, uint32(start-s.base))
		}
		s.acquire()
		spans = append(spans, tsSpan{s: s, pos: lookupIndex(s.idx.entries, rel), limit: s.size, maxTs: s.maxTs, gen: s.gen.Load()})
	}
	l.mu.RUnlock()
	defer releaseSpans(spans)

	for _, sp := range spans {
		found := false
		err := scanBatches(sp, func(h BatchHeader, batch []byte) (bool, error) {
			if h.LastOffset() < start || h.MaxTimestamp < ts {
				return true, nil
			}
			ferr := forEachRecord(batch, func(o, t int64) bool {
				if o >= start && t >= ts {
					offset, timestamp, found = o, t, true
					return false
				}
				return true
			})
			return !found, ferr
		})
		if err != nil || found {
			return offset, timestamp, found, err
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp returns the record with the largest timestamp (the first one
// among ties); ok is false for an empty log.
func (l *Log) MaxTimestamp() (offset, timestamp int64, ok bool, err error) {
	for range maxReadAttempts {
		offset, timestamp, ok, err = l.maxTimestamp()
		if err != errStale {
			return offset, timestamp, ok, err
		}
	}
	return 0, 0, false, staleErr("max timestamp lookup", 0)
}

func (l *Log) maxTimestamp() (offset, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, 0, false, ErrClosed
	}
	var best *segment
	for i := l.segmentFor(l.logStart); i < len(l.segs); i++ {
		if s := l.segs[i]; s.size > 0 && (best == nil || s.maxTs > best.maxTs) {
			best = s
		}
	}
	if best == nil {
		l.mu.RUnlock()
		return 0, 0, false, nil
	}
	if best.offMaxTs < 0 {
		// No batch carries a timestamp; report the first offset.
		off := max(best.base, l.logStart)
		l.mu.RUnlock()
		return off, -1, true, nil
	}
	target, maxTs := best.offMaxTs, best.maxTs
	best.acquire()
	sp := tsSpan{s: best, pos: lookupIndex(best.idx.entries, uint32(target-best.base)), limit: best.size, maxTs: maxTs, gen: best.gen.Load()}
	l.mu.RUnlock()
	defer best.release()

	err = scanBatches(sp, func(h BatchHeader, batch []byte) (bool, error) {
		if h.BaseOffset != target {
			return h.BaseOffset < target, nil
		}
		return false, forEachRecord(batch, func(o, t int64) bool {
			if t == maxTs {
				offset, timestamp, ok = o, t, true
				return false
			}
			return true
		})
	})
	if err == nil && best.stale(sp.gen) {
		return 0, 0, false, errStale
	}
	if err == nil && !ok {
		// The header promised maxTs but no record has it (a producer
		// may set maxTimestamp freely); the batch is still the answer.
		offset, timestamp, ok = target, maxTs, true
	}
	return offset, timestamp, ok, err
}

// scanBatches reads whole batches of a pinned span; fn returns false to
// stop. It returns errStale, before calling fn, once the span's segment was
// truncated or dropped (see segment.gen).
func scanBatches(sp tsSpan, fn func(BatchHeader, []byte) (bool, error)) error {
	sc := batchScanner{f: sp.s.log, pos: sp.pos, limit: sp.limit, whole: true, buf: scanBuffer(sp.limit - sp.pos)}
	for {
		h, _, body, err := sc.next()
		if sp.s.stale(sp.gen) {
			return errStale
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return readErr(sp.s, err)
		}
		more, err := fn(h, body)
		if err != nil || !more {
			return err
		}
	}
}

func releaseSpans(spans []tsSpan) {
	for _, sp := range spans {
		sp.s.release()
	}
}
