package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

// Log compaction (Kafka's log cleaner, cleanup.policy=compact).
//
// A pass builds a map key -> latest offset over the dirty section, from
// the first dirty offset (the cleaner checkpoint) up to the cleanable end,
// and then rewrites every closed segment from the start of the log up to
// where the map reached, keeping for each key only its latest record:
//
//   - every surviving record keeps its offset; a rewritten batch keeps its
//     base offset, lastOffsetDelta, leader epoch, producer id and epoch,
//     base sequence, maxTimestamp and attributes, is recompressed with its
//     own codec and gets a new CRC. Batches with nothing to drop are copied
//     byte for byte.
//   - records without a key are removed, as Kafka's cleaner removes them:
//     the produce path of a compacted topic refuses them, so any found
//     were written before the topic became compacted.
//   - a tombstone (a key with a null value) that is its key's latest
//     record stays until its delete horizon has passed. The horizon is
//     Kafka's (KIP-534): the first pass that keeps a batch holding a
//     tombstone sets attributes bit 6 and stores now+DeleteRetention in
//     the batch's firstTimestamp, rewriting the records' timestamp deltas
//     so that every record keeps its timestamp; a pass at a time past
//     the horizon drops the tombstones (strictly past, so that the
//     passes of one Clean, which share a clock reading, agree even with
//     a zero DeleteRetention). The horizon travels with the batch
//     (across regrouped segments and to replicas), so no per-segment
//     state is needed. Those two header fields are the only ones the
//     cleaner changes.
//   - a batch left with no record is dropped, except the last data batch
//     of each producer id in the log, which is kept with no records
//     (header only, lastOffsetDelta unchanged) so that the producer's
//     sequence state survives a reload.
//   - records of aborted transactions are dropped and never enter the
//     map; committed ones are deduplicated like any other; a marker goes
//     after its delete horizon once no data of its transaction is left;
//     nothing from the first open transaction on is cleaned
//     (clean_txn.go).
//
// What was cleaned is never touched again except by later passes, and the
// log start offset never moves. The active segment, and every segment at
// or past CleanOptions.UpTo or holding records younger than
// MinCompactionLag, is never read or rewritten. Consecutive rewritten
// segments are grouped into one while their old sizes add up to at most
// SegmentBytes; the group's segment keeps the first one's base offset.
//
// A dirty section holding more distinct keys than DedupeBufferBytes
// allows is cleaned in several passes: each map stops at a batch
// boundary, the pass cleans the log up to there and the next one carries
// on from it. The result is the same set of records as one pass.
//
// Offsets in a cleaned log have holes: between batches, inside batches
// (recordCount below lastOffsetDelta+1) and between segments. Open
// accepts holes only below the cleaner checkpoint (see recovery.go); the
// rest of the log keeps its contiguity check.
//
// The swap of cleaned segments is described in clean_swap.go, the
// filtering of batches in clean_batch.go.

// CleanOptions configures one Clean call. The zero values of the
// optional fields are Kafka's defaults or "off".
type CleanOptions struct {
	// UpTo bounds what may be cleaned: only segments lying wholly below
	// it are, so the bound is in effect rounded down to a segment base.
	// Callers pass min(high watermark, last stable offset); the active
	// segment is never cleaned whatever UpTo says, nor anything from the
	// first offset of a transaction with no marker up to the log end.
	UpTo int64
	// MinCompactionLag keeps segments holding a batch whose
	// maxTimestamp is newer than now minus this uncleaned, and every
	// segment after the first such one (min.compaction.lag.ms).
	MinCompactionLag time.Duration
	// DeleteRetention is how long a tombstone survives after the first
	// pass that kept it (delete.retention.ms).
	DeleteRetention time.Duration
	// DedupeBufferBytes bounds the memory of the key -> offset map
	// (log.cleaner.dedupe.buffer.size); 0 means 128 MiB. Each distinct
	// key costs about 48 bytes.
	DedupeBufferBytes int64
	// IOBytesPerSecond throttles reads and writes together
	// (log.cleaner.io.max.bytes.per.second); 0 means unthrottled.
	IOBytesPerSecond int64
	// Now is the clock for MinCompactionLag and DeleteRetention; nil
	// means the log's Config.Now.
	Now func() time.Time
}

// CleanStats describes what Clean did.
type CleanStats struct {
	Passes                  int   // passes that swapped segments in
	FirstDirty              int64 // cleaner checkpoint before
	CleanedTo               int64 // cleaner checkpoint after
	BytesRead, BytesWritten int64 // segment bytes read and written
	SegmentsRead            int   // old segments replaced
	SegmentsWritten         int   // new segments swapped in
	RecordsRemoved          int64 // superseded records and expired tombstones
	TombstonesRemoved       int64 // of RecordsRemoved, expired tombstones
	BatchesRemoved          int64 // batches left empty and dropped
	EmptyBatchesKept        int64 // emptied batches kept for their producer
	AbortedRecordsRemoved   int64 // of RecordsRemoved, records of aborted transactions
	MarkersRemoved          int64 // transaction markers removed past their delete horizon
	// EmptyAbortedTxns are the offsets of the abort markers the passes
	// met with no data of their transaction left: the partition's list
	// of aborted transactions need not name them any more.
	EmptyAbortedTxns []int64
}

// CleanableBytes splits the cleanable part of the log (closed segments
// below the bound) at the first dirty offset, for the caller's
// min.cleanable.dirty.ratio decision. A segment holding the first dirty
// offset counts as dirty.
type CleanableBytes struct {
	FirstDirty   int64 // where the next pass starts deduplicating
	CleanableEnd int64 // first offset a clean with these options leaves alone
	Clean, Dirty int64 // bytes of segments below and from FirstDirty
	// DirtySince is the earliest timestamp (Unix ms) of the first batch
	// of a dirty segment, -1 when there is none: the age that
	// max.compaction.lag.ms is judged by, as Kafka judges it.
	DirtySince int64
}

// DirtyRatio is Dirty / (Clean + Dirty), 0 for nothing cleanable.
func (c CleanableBytes) DirtyRatio() float64 {
	if c.Clean+c.Dirty == 0 {
		return 0
	}
	return float64(c.Dirty) / float64(c.Clean+c.Dirty)
}

// ErrCleanAborted is returned by Clean when TruncateTo, Reset or
// retention changed the segments a pass was cleaning: the pass's output is
// discarded and the log is as before it. Calling Clean again is safe.
var ErrCleanAborted = errors.New("log: clean aborted: segments changed meanwhile")

const (
	cleanerCheckpointFile = "cleaner-checkpoint"
	cleanSwapFile         = "clean-swap"
	cleanedSuffix         = ".cleaned"

	defaultDedupeBufferBytes = 128 << 20
)

func (o CleanOptions) normalized(cfg Config) CleanOptions {
	if o.DedupeBufferBytes <= 0 {
		o.DedupeBufferBytes = defaultDedupeBufferBytes
	}
	if o.Now == nil {
		o.Now = cfg.Now
	}
	return o
}

// FirstDirtyOffset is the persisted cleaner checkpoint: every record
// below it was deduplicated by some pass (or lies below the log start).
func (l *Log) FirstDirtyOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return max(l.cleanedTo, l.logStart)
}

// cleanableCount returns how many leading segments a clean with o may
// touch: closed, wholly below o.UpTo, and (with a lag) each no younger
// than the lag. Caller holds mu.
func (l *Log) cleanableCount(o CleanOptions, nowMs int64) int {
	lagMs := o.MinCompactionLag.Milliseconds()
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].base <= o.UpTo &&
		(lagMs <= 0 || l.segs[n].maxTs <= nowMs-lagMs) {
		n++
	}
	return n
}

// Cleanable reports the clean and dirty bytes a Clean with opts would
// consider.
func (l *Log) Cleanable(opts CleanOptions) (CleanableBytes, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return CleanableBytes{}, ErrClosed
	}
	o := opts.normalized(l.cfg)
	k := l.cleanableCount(o, o.Now().UnixMilli())
	first := max(l.cleanedTo, l.logStart)
	c := CleanableBytes{FirstDirty: first, CleanableEnd: l.segs[k].base, DirtySince: -1}
	hdr := make([]byte, batchHeaderLen)
	for i := range k {
		s := l.segs[i]
		if l.segs[i+1].base <= first {
			c.Clean += s.size
			continue
		}
		c.Dirty += s.size
		if s.size < batchHeaderLen {
			continue
		}
		if err := readFull(s.log, hdr, 0); err != nil {
			return CleanableBytes{}, readErr(s, err)
		}
		if ts := parseHeader(hdr).MaxTimestamp; ts >= 0 && (c.DirtySince < 0 || ts < c.DirtySince) {
			c.DirtySince = ts
		}
	}
	c.FirstDirty = min(c.FirstDirty, c.CleanableEnd)
	return c, nil
}

// Clean compacts the closed segments below opts.UpTo, in as many passes
// as the dedupe buffer needs, and returns when the cleanable section is
// clean, ctx is done or an error occurs. Appends, reads and Sync go on
// meanwhile; each pass takes the log's write lock only to swap its
// segments in. One Clean runs at a time per log. An error from the
// swap's commit onwards is sticky (ErrLogFailed); Open then finishes the
// swap.
func (l *Log) Clean(ctx context.Context, opts CleanOptions) (st CleanStats, err error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	cfg, err := l.writable()
	if err != nil {
		return CleanStats{}, err
	}
	o := opts.normalized(cfg)
	st = CleanStats{FirstDirty: l.FirstDirtyOffset()}
	st.CleanedTo = st.FirstDirty
	th := throttle{rate: o.IOBytesPerSecond, start: time.Now()}
	// One clock reading for every pass: they then agree on which
	// tombstones are past their horizon and on the compaction lag.
	nowMs := o.Now().UnixMilli()
	// Every pass rewrites from the log start, so passes meet the same
	// markers again.
	defer func() {
		slices.Sort(st.EmptyAbortedTxns)
		st.EmptyAbortedTxns = slices.Compact(st.EmptyAbortedTxns)
	}()
	for {
		more, unstable, err := l.cleanPass(ctx, o, nowMs, &st, &th)
		if err != nil {
			return st, err
		}
		if unstable >= 0 {
			// An open transaction's data is neither compacted nor
			// deduplicated against: clean only up to it.
			o.UpTo = min(o.UpTo, unstable)
			continue
		}
		if !more {
			return st, nil
		}
	}
}

// throttle paces the cleaner's I/O to rate bytes per second.
type throttle struct {
	rate  int64
	start time.Time
	done  int64
}

func (t *throttle) add(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.rate <= 0 {
		return nil
	}
	t.done += int64(n)
	want := time.Duration(float64(t.done) / float64(t.rate) * float64(time.Second))
	if d := want - time.Since(t.start); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
	}
	return nil
}

// cleanPass runs one pass; more reports that the map stopped short of
// the cleanable end, so another pass has work. A pass that finds a
// transaction still open below where it would clean changes nothing and
// returns its first offset as unstable (-1 otherwise).
func (l *Log) cleanPass(ctx context.Context, o CleanOptions, nowMs int64, st *CleanStats, th *throttle) (more bool, unstable int64, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return false, -1, ErrClosed
	}
	k := l.cleanableCount(o, nowMs)
	first := max(l.cleanedTo, l.logStart)
	cleanEnd := l.segs[k].base
	if k == 0 || first >= cleanEnd {
		l.mu.RUnlock()
		return false, -1, nil
	}
	segs := slices.Clone(l.segs[:k])
	gens := make([]uint64, k)
	sizes := make([]int64, k)
	for i, s := range segs {
		gens[i], sizes[i] = s.gen.Load(), s.size
		s.acquire()
	}
	ends := make([]int64, k) // where each segment's offset range ends
	for i := range k {
		ends[i] = l.segs[i+1].base
	}
	cfg := l.cfg
	l.mu.RUnlock()
	defer releaseAll(segs)

	buf := make([]byte, 1<<20)
	pidLast := map[int64]producerLast{}
	tx := newTxnScan()
	var markerBuf []byte

	// The map over [first, passEnd).
	m := newOffsetMap(o.DedupeBufferBytes)
	passEnd := cleanEnd
scan:
	for i, s := range segs {
		if ends[i] <= first {
			// Clean section: only the producers' last batches and the
			// transactions matter.
			sc := batchScanner{f: s.log, limit: sizes[i], buf: buf}
			for {
				h, pos, _, err := sc.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					return false, -1, readErr(s, err)
				}
				notePID(pidLast, h)
				if h.ProducerID < 0 || !h.IsTransactional() {
					continue
				}
				if !h.IsControl() {
					tx.data(h)
					continue
				}
				if tx.needsType(h) {
					markerBuf = slices.Grow(markerBuf[:0], h.Size())[:h.Size()]
					if err := readFull(s.log, markerBuf, pos); err != nil {
						return false, -1, readErr(s, err)
					}
					commit, _ := MarkerType(markerBuf)
					tx.marker(h, commit, m)
				}
			}
			buf = sc.buf
			continue
		}
		sc := batchScanner{f: s.log, limit: sizes[i], whole: true, buf: buf}
		for {
			h, _, b, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return false, -1, readErr(s, err)
			}
			txn := h.ProducerID >= 0 && h.IsTransactional()
			if h.IsControl() {
				notePID(pidLast, h)
				if txn && tx.needsType(h) {
					commit, _ := MarkerType(b)
					tx.marker(h, commit, m)
				}
				continue
			}
			if h.LastOffset() < first {
				notePID(pidLast, h)
				if txn {
					tx.data(h)
				}
				continue
			}
			if (m.len() > 0 || tx.npend > 0) && !m.room(tx.npend+int(h.NumRecords)) {
				passEnd = h.BaseOffset
				buf = sc.buf
				break scan
			}
			notePID(pidLast, h)
			if txn {
				tx.data(h)
			}
			data, err := decompressInto(h, b)
			if err != nil {
				return false, -1, fmt.Errorf("log: clean: segment %d: %w", s.base, err)
			}
			for range h.NumRecords {
				r, rest, err := parseRawRecord(data)
				if err != nil {
					return false, -1, fmt.Errorf("%w: clean: batch %d: %v", ErrCorruptBatch, h.BaseOffset, err)
				}
				data = rest
				off := h.BaseOffset + r.offDelta
				switch {
				case !r.hasKey || off < first:
				case txn:
					tx.key(h.ProducerID, m.hash(r.key), off)
				default:
					m.put(r.key, off)
				}
			}
			if err := th.add(ctx, h.Size()); err != nil {
				return false, -1, err
			}
		}
		buf = sc.buf
	}
	// Transactions the map reached but not their markers.
	from := max(passEnd, l.LogStartOffset())
	if unstable, err := l.resolveTxns(tx, from, m); err != nil || unstable >= 0 {
		return false, unstable, err
	}
	// Producers' later batches, past the map.
	if err := l.Batches(from, func(h BatchHeader) bool {
		if h.BaseOffset >= passEnd {
			notePID(pidLast, h)
		}
		return true
	}); err != nil {
		return false, -1, fmt.Errorf("log: clean: %w", err)
	}

	// Rewrite segments from the start up to passEnd, in groups.
	n := 0
	for n < k && segs[n].base < passEnd {
		n++
	}
	f := batchFilter{m: m, passEnd: passEnd, pidLast: pidLast, txns: tx, txnData: map[int64]bool{}, nowMs: nowMs, horizonMs: nowMs + o.DeleteRetention.Milliseconds()}
	var neu []*segment
	abort := func() {
		for _, s := range neu {
			s.closeFiles()
			for _, ext := range []string{extLog, extIndex, extTimeIndex} {
				l.fsys.Remove(segmentName(l.dir, s.base, ext) + cleanedSuffix)
			}
		}
	}
	for g := 0; g < n; {
		h := g + 1
		total := sizes[g]
		for h < n && total+sizes[h] <= cfg.SegmentBytes && ends[h]-1-segs[g].base <= math.MaxUint32 {
			total += sizes[h]
			h++
		}
		s, err := l.writeCleaned(ctx, segs[g:h], sizes[g:h], &f, cfg.IndexIntervalBytes, buf, st, th)
		if err != nil {
			if s != nil {
				neu = append(neu, s)
			}
			abort()
			return false, -1, err
		}
		if s.size > 0 || g == 0 {
			// The first segment stays even if empty: its base offset
			// is the log's start when no log-start-offset was written.
			neu = append(neu, s)
		} else {
			s.closeFiles()
			for _, ext := range []string{extLog, extIndex, extTimeIndex} {
				l.fsys.Remove(segmentName(l.dir, s.base, ext) + cleanedSuffix)
			}
		}
		g = h
	}
	if err := syncDir(l.fsys, l.dir); err != nil {
		abort()
		return false, -1, fmt.Errorf("log: clean: fsync %s: %w", l.dir, err)
	}
	if committed, err := l.swapCleaned(segs[:n], gens[:n], sizes[:n], neu, passEnd); err != nil {
		if !committed {
			abort()
		}
		return false, -1, err
	}
	st.Passes++
	st.CleanedTo = passEnd
	st.SegmentsRead += n
	st.SegmentsWritten += len(neu)
	for _, s := range neu {
		st.BytesWritten += s.size
	}
	return passEnd < cleanEnd, -1, nil
}

// writeCleaned writes the cleaned copy of group (consecutive segments)
// as one new segment under .cleaned names, fsynced. The returned segment
// holds its open files and published state; it is not in the log yet.
func (l *Log) writeCleaned(ctx context.Context, group []*segment, sizes []int64, f *batchFilter, interval int, buf []byte, st *CleanStats, th *throttle) (*segment, error) {
	base := group[0].base
	s := newSegment(l.fsys, l.dir, base)
	var err error
	flag := os.O_RDWR | os.O_CREATE | os.O_TRUNC
	if s.log, err = l.fsys.OpenFile(segmentName(l.dir, base, extLog)+cleanedSuffix, flag, 0o644); err != nil {
		return nil, fmt.Errorf("log: clean: %w", err)
	}
	if s.idx.f, err = l.fsys.OpenFile(segmentName(l.dir, base, extIndex)+cleanedSuffix, flag, 0o644); err != nil {
		return s, fmt.Errorf("log: clean: %w", err)
	}
	if s.tidx.f, err = l.fsys.OpenFile(segmentName(l.dir, base, extTimeIndex)+cleanedSuffix, flag, 0o644); err != nil {
		return s, fmt.Errorf("log: clean: %w", err)
	}
	x := indexer{base: base, interval: interval, maxTs: -1, offMaxTs: -1}
	out := f.out[:0]
	defer func() { f.out = out[:0] }() // the next group's buffer
	var pos int64
	next := base
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		if _, err := s.log.WriteAt(out, pos); err != nil {
			return err
		}
		if err := th.add(ctx, len(out)); err != nil {
			return err
		}
		pos += int64(len(out))
		out = out[:0]
		return nil
	}
	for i, old := range group {
		sc := batchScanner{f: old.log, limit: sizes[i], whole: true, buf: buf}
		for {
			h, _, b, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return s, readErr(old, err)
			}
			if err := th.add(ctx, h.Size()); err != nil {
				return s, err
			}
			if old.base >= f.passEnd || h.BaseOffset >= f.passEnd {
				// Past the map: copied as it is.
				out = append(out, b...)
			} else {
				before := len(out)
				if out, err = f.filter(out, b, h, st); err != nil {
					return s, fmt.Errorf("log: clean: segment %d: %w", old.base, err)
				}
				st.BytesRead += int64(h.Size())
				if len(out) == before {
					continue
				}
				h = parseHeader(out[before:])
			}
			x.add(h, pos+int64(len(out)-h.Size()))
			next = h.LastOffset() + 1
			if len(out) >= 1<<20 {
				if err := flush(); err != nil {
					return s, fmt.Errorf("log: clean: write segment %d: %w", base, err)
				}
			}
		}
	}
	if err := flush(); err != nil {
		return s, fmt.Errorf("log: clean: write segment %d: %w", base, err)
	}
	x.maybeTime()
	if err := writeIndexFile(s.idx.f, offsetIndexMagc, encodeIndexEntries(nil, base, x.idx)); err != nil {
		return s, fmt.Errorf("log: clean: write index %d: %w", base, err)
	}
	if err := writeTimeIndexFile(s.tidx.f, base, true, x.tim); err != nil {
		return s, fmt.Errorf("log: clean: write time index %d: %w", base, err)
	}
	if err := s.sync(); err != nil {
		return s, fmt.Errorf("log: clean: fsync segment %d: %w", base, err)
	}
	s.idx.entries, s.tidx.entries = x.idx, x.tim
	s.size, s.next, s.maxTs, s.offMaxTs, s.bytesSinceIndex = pos, next, x.maxTs, x.offMaxTs, x.bytesSince
	return s, nil
}
