package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// segmentFor returns the index of the segment holding offset, skipping
// segments that end at or before it. Caller holds mu.
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	for i < len(l.segs) && l.segs[i].next <= offset {
		i++
	}
	return i
}

// checkRange validates a read offset. Caller holds mu.
func (l *Log) checkRange(offset int64) error {
	if l.closed {
		return ErrClosed
	}
	if offset < l.logStart || offset > l.end {
		return fmt.Errorf("%w: offset %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.logStart, l.end)
	}
	return nil
}

// readErr turns an I/O error on a segment deleted under the reader into the
// error a consumer can act on.
func readErr(s *segment, err error) error {
	if s.deleted.Load() {
		return fmt.Errorf("%w: segment %d deleted during read: %v", ErrOffsetOutOfRange, s.base, err)
	}
	return fmt.Errorf("log: read segment %d: %w", s.base, err)
}

// maxReadAttempts bounds how often a reader starts over because TruncateTo
// or Reset changed what it had pinned (see segment.gen). Each retry needs
// another truncation or reset to land during the read, so running out is
// practically impossible; it is reported as ErrOffsetOutOfRange.
const maxReadAttempts = 8

// errStale is returned internally when a pinned segment was truncated or
// dropped during the read.
var errStale = errors.New("log: segment changed during read")

func staleErr(what string, offset int64) error {
	return fmt.Errorf("%w: %s at offset %d: log truncated or reset meanwhile", ErrOffsetOutOfRange, what, offset)
}

// Read returns whole batches starting with the one containing offset and
// ending before upTo (the high watermark, on a batch boundary). The result
// is a fresh buffer the caller owns; its capacity is the buffer's size,
// which may exceed what it holds. Reads never span segments, like Kafka.
// A read that overlaps a TruncateTo or Reset starts over on the new log.
func (l *Log) Read(offset int64, maxBytes int, mode ReadMode, upTo int64) ([]byte, error) {
	return l.ReadWith(offset, maxBytes, mode, upTo, nil)
}

// ReadWith is Read into a buffer from alloc (which returns a slice of
// length n; nil means make), for callers that recycle their buffers.
func (l *Log) ReadWith(offset int64, maxBytes int, mode ReadMode, upTo int64, alloc func(n int) []byte) ([]byte, error) {
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	for range maxReadAttempts {
		b, err := l.read(offset, maxBytes, mode, upTo, alloc)
		if err != errStale {
			return b, err
		}
	}
	return nil, staleErr("read", offset)
}

func (l *Log) read(offset int64, maxBytes int, mode ReadMode, upTo int64, alloc func(int) []byte) ([]byte, error) {
	l.mu.RLock()
	if err := l.checkRange(offset); err != nil {
		l.mu.RUnlock()
		return nil, err
	}
	upTo = min(upTo, l.end)
	i := l.segmentFor(offset)
	if offset >= upTo || i == len(l.segs) {
		l.mu.RUnlock()
		return nil, nil
	}
	s := l.segs[i]
	// A cleaned log may hold offset in a hole before s's base; the read
	// then starts at s's first batch.
	startPos := lookupIndex(s.idx.entries, uint32(max(offset, s.base)-s.base))
	limit := s.size
	gen := s.gen.Load()
	s.acquire()
	l.mu.RUnlock()
	defer s.release()
	// Every result, data or error, is checked against gen after the I/O
	// it depends on.
	fail := func(err error) ([]byte, error) {
		if s.stale(gen) {
			return nil, errStale
		}
		return nil, readErr(s, err)
	}

	bufp := l.scratch.Get().(*[]byte)
	defer l.scratch.Put(bufp)
	sc := batchScanner{f: s.log, pos: startPos, limit: limit, buf: *bufp}
	var first BatchHeader
	var firstPos int64
	for {
		h, p, _, err := sc.next()
		if err == io.EOF {
			if s.stale(gen) {
				return nil, errStale
			}
			return nil, nil
		}
		if err != nil {
			return fail(err)
		}
		if h.LastOffset() >= offset {
			first, firstPos = h, p
			break
		}
	}

	n := int64(maxBytes)
	if int64(first.Size()) > n {
		if mode == Strict {
			if s.stale(gen) {
				return nil, errStale
			}
			return nil, nil
		}
		n = int64(first.Size())
	}
	n = min(n, limit-firstPos)
	out := alloc(int(n))
	// The scan chunk usually already holds the start of the range; copy it
	// and read only the rest, so a typical fetch costs two syscalls.
	copied := 0
	if firstPos >= sc.bufOff && firstPos < sc.bufOff+int64(sc.bufLen) {
		copied = copy(out, sc.buf[firstPos-sc.bufOff:sc.bufLen])
	}
	if copied < len(out) {
		if err := readFull(s.log, out[copied:], firstPos+int64(copied)); err != nil {
			return fail(err)
		}
	}
	if s.stale(gen) {
		return nil, errStale
	}
	// Keep only whole batches below upTo. The first batch always qualifies:
	// its base is <= offset < upTo and n covers it.
	end := 0
	for end+batchPrefixLen <= len(out) {
		base := int64(binary.BigEndian.Uint64(out[end:]))
		size := int(binary.BigEndian.Uint32(out[end+offLength:])) + batchPrefixLen
		if base >= upTo || end+size > len(out) || size < batchHeaderLen {
			break
		}
		end += size
	}
	// The capacity stays the buffer's: callers that account for memory
	// (the fetch budget) charge what was allocated, not what was kept.
	return out[:end], nil
}

// Batches calls fn for each batch header from the batch containing from
// onward, across segments, until fn returns false. It sees the log as of
// the call; appends made meanwhile may or may not be visited. If TruncateTo
// or Reset removes batches it has not visited yet, it stops with an error
// wrapping ErrOffsetOutOfRange.
func (l *Log) Batches(from int64, fn func(BatchHeader) bool) error {
	type span struct {
		s          *segment
		pos, limit int64
		gen        uint64
	}
	l.mu.RLock()
	if err := l.checkRange(from); err != nil {
		l.mu.RUnlock()
		return err
	}
	var spans []span
	for i := l.segmentFor(from); i < len(l.segs); i++ {
		s := l.segs[i]
		var pos int64
		if from > s.base {
			pos = lookupIndex(s.idx.entries, uint32(from-s.base))
		}
		s.acquire()
		spans = append(spans, span{s, pos, s.size, s.gen.Load()})
	}
	l.mu.RUnlock()
	defer func() {
		for _, sp := range spans {
			sp.s.release()
		}
	}()
	var toScan int64
	for _, sp := range spans {
		toScan += sp.limit - sp.pos
	}
	buf := scanBuffer(toScan)
	for _, sp := range spans {
		sc := batchScanner{f: sp.s.log, pos: sp.pos, limit: sp.limit, buf: buf}
		for {
			h, _, _, err := sc.next()
			// fn may already have seen earlier batches, so a truncation
			// or reset meanwhile cannot be retried transparently.
			if sp.s.stale(sp.gen) {
				return staleErr("batches", from)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return readErr(sp.s, err)
			}
			if h.LastOffset() < from {
				continue
			}
			if !fn(h) {
				return nil
			}
		}
		buf = sc.buf
	}
	return nil
}
