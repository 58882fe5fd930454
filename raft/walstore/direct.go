package walstore

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"github.com/weir-broker/weir/log"
)

// The active segment is written with O_DIRECT, from a ring that keeps its
// newest bytes in memory.
//
// Every produced byte goes through the WAL, and written through the page
// cache each of them cost a copy into a page the kernel had to find,
// account, write back and (dropcache.go) free again: with ten producers
// on a hundred partitions that copy alone was a quarter of the broker's
// CPU, more than the same bytes' copy into the partitions' segments. The
// WAL is written once and, but for the newest bytes, read only by replay,
// relocation and a follower far behind, so it has no use for the cache.
//
// The writer copies each batch into the ring, at the position of its
// file offset modulo the ring's size, zeroes the ring up to the next
// directAlign boundary and writes the aligned span with O_DIRECT: from
// the start of the block holding the batch's first byte (those earlier
// bytes are still in the ring) to the end of the block holding its last.
// The ring is resident and reused, so a steady load faults in nothing.
//
// Rewriting the block the previous batch ended in is safe although that
// batch may already be acknowledged: its bytes are rewritten unchanged,
// so a torn write leaves each sector old or new and either way holds
// them. The zeros after the last record stay on disk until the next batch
// covers them; replay takes them for a torn tail (a record cannot have
// length 0) and cuts them, and a segment is truncated to its last record
// and fsynced before the next one is created (seal), because damage in any
// segment but the last is lost data to replay.
//
// The ring is also the cache of what is read back soon: GetLog copies an
// entry from it while it is among the newest ringBytes written, instead
// of reading the disk. A roll does not empty it: the new segment's bytes
// follow the old one's in the ring (from the next block), so a follower
// just behind still gets the old segment's tail from memory. Everything
// else is read through the segment's own buffered handle, as before.
//
// Where the file system refuses O_DIRECT (at open, or with EINVAL at the
// first write) or is not the OS's, the same aligned writes go through the
// segment's buffered handle.
const (
	// directAlign is what O_DIRECT requires of a write's offset, length
	// and memory: a logical block, 512 or 4096 bytes on every device this
	// runs on.
	directAlign = 4096
	// ringBytes is the ring's size: the newest bytes a leader may read
	// back to send to followers (the same window dropcache.go keeps).
	ringBytes = cacheWindow
)

// ring is the WAL's newest bytes and the active segment's write handle.
// Bytes have positions in the ring's own stream: a segment's offset off
// is at its base + off, and position p at buf[p % len(buf)]. The writer
// goroutine owns the handle and is the only writer of the ring's bytes;
// mu orders it against readers.
type ring struct {
	mu     sync.RWMutex
	buf    []byte // ringBytes, aligned to directAlign; nil once freed
	seq    uint32 // the active segment (0: none yet)
	base   int64  // position of seq's offset 0, a multiple of directAlign
	lo, hi int64  // positions held: [lo, hi)
	// The segment before seq, whose tail may still be held: its
	// sequence (0: none), base and the end of its records.
	prevSeq           uint32
	prevBase, prevEnd int64

	// Writer only.
	wf       log.File // seq's write handle: O_DIRECT, or the segment's own
	owned    bool     // wf was opened here and is closed here
	noDirect bool     // the file system refused O_DIRECT once: stop asking
	iov      [][]byte
}

func newRing() *ring { return &ring{buf: allocRing(ringBytes)} }

// free releases the ring's memory; reads fall back to the files.
func (r *ring) free() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeHandle()
	if r.buf != nil {
		freeRing(r.buf)
		r.buf = nil
	}
}

func (r *ring) closeHandle() {
	if r.owned {
		r.wf.Close()
	}
	r.wf, r.owned = nil, false
}

// read copies seq's bytes at off into dst if the ring holds all of them.
func (r *ring) read(seq uint32, dst []byte, off int64) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := int64(len(dst))
	var p int64
	switch {
	case r.buf == nil || seq == 0:
		return false
	case seq == r.seq:
		p = r.base + off
	case seq == r.prevSeq && off+n <= r.prevEnd:
		p = r.prevBase + off
	default:
		return false
	}
	if p < r.lo || p+n > r.hi {
		return false
	}
	r.copyOut(dst, p)
	return true
}

// ringWrite writes bufs, n bytes in all, at off of the active segment
// sg, whose records end at off: through the ring with O_DIRECT, in whole
// blocks.
func (s *Store) ringWrite(sg *segment, bufs [][]byte, n int, off int64) error {
	r := s.ring
	start := off &^ (directAlign - 1)
	end := off + int64(n)
	aend := (end + directAlign - 1) &^ (directAlign - 1)
	if aend-start > int64(len(r.buf))/2 {
		// Larger than the ring can stage (one entry of tens of MiB):
		// written buffered, and the ring starts over behind it.
		r.mu.Lock()
		r.seq, r.prevSeq, r.lo = 0, 0, r.hi
		r.mu.Unlock()
		r.closeHandle()
		_, err := log.WriteVectorAt(sg.f, bufs, off)
		return err
	}
	if err := s.ringFor(sg, start, off); err != nil {
		return err
	}
	r.mu.Lock()
	r.lo = max(r.lo, r.base+aend-int64(len(r.buf)))
	p := r.base + off
	for _, b := range bufs {
		r.copyIn(p, b)
		p += int64(len(b))
	}
	r.zero(r.base+end, r.base+aend)
	r.hi = r.base + end
	r.mu.Unlock()

	r.iov = slices.AppendSeq(r.iov[:0], r.pieces(r.base+start, r.base+aend))
	_, err := log.WriteVectorAt(r.wf, r.iov, start)
	if r.owned && errors.Is(err, syscall.EINVAL) {
		// Accepted at open, refused at write (an alignment this device
		// does not take): the same write, buffered, from now on.
		s.logger.Warn("walstore: O_DIRECT write refused; writing through the page cache", "file", sg.path, "error", err)
		r.closeHandle()
		r.wf, r.noDirect = sg.f, true
		_, err = log.WriteVectorAt(r.wf, r.iov, start)
	}
	clear(r.iov)
	return err
}

// ringFor makes the ring hold sg's bytes [start, off), the head of the
// block the next write begins in, and r.wf sg's write handle.
func (s *Store) ringFor(sg *segment, start, off int64) error {
	r := s.ring
	if r.seq == sg.seq && r.wf != nil && r.lo <= r.base+start && r.hi == r.base+off {
		return nil
	}
	if r.seq != sg.seq {
		// The new segment's bytes start at the next block of the ring;
		// after a roll the old one's stay readable behind them.
		r.mu.Lock()
		base := (r.hi + directAlign - 1) &^ (directAlign - 1)
		if r.seq != 0 && sg.seq == r.seq+1 && start == 0 {
			r.prevSeq, r.prevBase, r.prevEnd = r.seq, r.base, r.hi-r.base
		} else {
			r.prevSeq, r.lo = 0, base+start
		}
		r.seq, r.base, r.hi = sg.seq, base, base+start
		r.mu.Unlock()
		r.closeHandle()
	}
	if r.wf == nil {
		r.closeHandle()
		r.wf = sg.f
		if _, osfs := s.fs.(log.OSFS); osfs && oDirect != 0 && !r.noDirect {
			f, err := s.fs.OpenFile(sg.path, os.O_WRONLY|oDirect, 0)
			if err == nil {
				r.wf, r.owned = f, true
			} else {
				s.logger.Warn("walstore: O_DIRECT refused; writing through the page cache", "file", sg.path, "error", err)
				r.noDirect = true
			}
		}
	}
	head := make([]byte, off-start)
	if n, err := sg.f.ReadAt(head, start); n != len(head) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("walstore: reading %s at %d: %w", sg.path, start, err)
	}
	r.mu.Lock()
	if r.hi != r.base+start {
		// Whatever the ring held does not lead up to start.
		r.prevSeq, r.lo, r.hi = 0, r.base+start, r.base+start
	}
	r.lo = max(r.lo, r.base+off-int64(len(r.buf)))
	r.copyIn(r.base+start, head)
	r.hi = r.base + off
	r.mu.Unlock()
	return nil
}

// seal truncates the active segment to its last record (end) and fsyncs
// it, before another segment is created or the store closes: only the
// last segment may end in anything but a record.
func (s *Store) seal(sg *segment, end int64) error {
	r := s.ring
	if r.seq == sg.seq {
		r.closeHandle()
	}
	if err := sg.f.Truncate(end); err != nil {
		return fmt.Errorf("walstore: truncating %s at %d: %w", sg.path, end, err)
	}
	if err := sg.f.Sync(); err != nil {
		return fmt.Errorf("walstore: syncing %s: %w", sg.path, err)
	}
	return nil
}

// pieces yields the ring's slices holding positions [from, to): one, or
// two where they wrap. Both are aligned when from and to are, as the
// ring and its size are.
func (r *ring) pieces(from, to int64) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for from < to {
			p := from % int64(len(r.buf))
			k := min(to-from, int64(len(r.buf))-p)
			if !yield(r.buf[p : p+k]) {
				return
			}
			from += k
		}
	}
}

// copyIn copies b into the ring at position off.
func (r *ring) copyIn(off int64, b []byte) {
	for piece := range r.pieces(off, off+int64(len(b))) {
		b = b[copy(piece, b):]
	}
}

// copyOut copies the ring's bytes from position off into dst.
func (r *ring) copyOut(dst []byte, off int64) {
	for piece := range r.pieces(off, off+int64(len(dst))) {
		dst = dst[copy(dst, piece):]
	}
}

func (r *ring) zero(from, to int64) {
	for piece := range r.pieces(from, to) {
		clear(piece)
	}
}

// alignedSlice is n bytes of the Go heap starting on a directAlign
// boundary.
func alignedSlice(n int) []byte {
	b := make([]byte, n+directAlign)
	p := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (directAlign - 1))
	skip := (directAlign - p) & (directAlign - 1)
	return b[skip : skip+n : skip+n]
}
