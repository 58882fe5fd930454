package walstore

import (
	"fmt"
	"io"
	"slices"
)

// relocateMinSegments is how many segments the WAL may have before old
// live data is copied forward. Below it, a few MiB pinned by an idle group
// are cheaper than rewriting them.
const relocateMinSegments = 4

// relocation is one record copied out of the oldest segment.
type relocation struct {
	g   *group
	idx uint64 // entry index, or 0 for stable slot key
	key int
	n   uint32
	off int // position in the copy buffer
}

// reclaimStep does one unit of space reclamation when the writer is idle
// or between batches, and reports whether it did anything. Only the
// oldest segment ever leaves the WAL (see doc.go for why replay depends on
// that); one that still holds live records is first emptied by copying
// them to the tail, a bounded chunk per step so callers' commits
// interleave.
func (s *Store) reclaimStep() bool {
	if len(s.segs) < 2 {
		return false
	}
	old := s.segs[0] // the writer is the only mutator of segs and live
	if old.live == 0 {
		if err := s.dropOldest(); err != nil {
			s.fail(err)
			return false
		}
		return true
	}
	if !s.shouldRelocate() {
		return false
	}
	moved, err := s.relocate(old)
	if err != nil {
		s.fail(err)
		return false
	}
	return moved
}

// shouldRelocate bounds disk use: once there are more than a few
// segments, copy the oldest forward if it is at most half live, or if the
// whole WAL holds more than twice the live bytes plus a few segments. The
// second rule stops a half-live oldest segment from pinning an unbounded
// run of dead ones behind it; each relocation pass moves at most the live
// bytes, so the work is amortized against the dead bytes it frees.
func (s *Store) shouldRelocate() bool {
	if len(s.segs) <= relocateMinSegments {
		return false
	}
	old := s.segs[0]
	return old.live*2 <= old.size || s.diskBytes > 2*s.liveBytes+relocateMinSegments*s.segBytes
}

// relocate copies up to one batch of old's live records verbatim to the
// tail, fsyncs, and repoints the index at the copies. Replay treats a copy
// like the original (an entry record sets its index; a stable record sets
// its key), and the copy is newer than any delete-range or drop that
// preceded it, so replay with or without old gives the same state.
func (s *Store) relocate(old *segment) (bool, error) {
	limit := int(min(maxBatchBytes, s.segBytes/2))
	buf := s.wbuf[:0]
	fixes := s.fixes[:0]
	var readErr error
	read := func(name string, at loc) bool {
		if len(buf) > 0 && len(buf)+int(at.n) > limit {
			return false
		}
		start := len(buf)
		buf = slices.Grow(buf, int(at.n))[:start+int(at.n)]
		if n, err := old.f.ReadAt(buf[start:], int64(at.off)); n != int(at.n) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			readErr = fmt.Errorf("walstore: relocating from %s at %d: %w", old.path, at.off, err)
			return false
		}
		rec, err := parseRecord(buf[start:], old.salt)
		if err == nil && string(rec.group) != name {
			err = errBadPayload
		}
		if err != nil {
			readErr = fmt.Errorf("walstore: relocating from %s at %d: %w", old.path, at.off, err)
			return false
		}
		// The copy is salted for the segment it goes to.
		saltFrames([][]byte{buf[start:]}, old.salt)
		return true
	}
scan:
	for name, g := range s.groups {
		for i, at := range g.locs {
			if at.seg != old.seq {
				continue
			}
			off := len(buf)
			if !read(name, at) {
				break scan
			}
			fixes = append(fixes, relocation{g: g, idx: g.first + uint64(i), n: at.n, off: off})
		}
		for i, kv := range g.stable {
			if kv.at.seg != old.seq {
				continue
			}
			off := len(buf)
			if !read(name, kv.at) {
				break scan
			}
			fixes = append(fixes, relocation{g: g, key: i, n: kv.at.n, off: off})
		}
	}
	s.wbuf, s.fixes = buf[:0], fixes[:0]
	if readErr != nil {
		return false, readErr
	}
	if len(fixes) == 0 {
		// live says there is something to move but no index entry points
		// here: an accounting bug. Stop reclaiming rather than spin.
		s.logger.Error("walstore: segment has live bytes but no records to relocate", "file", old.path, "live", old.live)
		return false, nil
	}
	sg, base, err := s.write(buf)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	for _, f := range fixes {
		at := loc{seg: sg.seq, off: uint32(base) + uint32(f.off), n: f.n}
		if f.idx != 0 {
			f.g.locs[f.idx-f.g.first] = at
		} else {
			f.g.stable[f.key].at = at
		}
		old.live -= int64(f.n)
		sg.live += int64(f.n)
	}
	s.mu.Unlock()
	clear(s.fixes[:len(fixes)])
	s.relocated.Add(uint64(len(buf)))
	s.records.Add(uint64(len(fixes)))
	if s.met != nil {
		s.met.relocated.Add(float64(len(buf)))
	}
	s.logger.Debug("walstore: relocated live records", "from", old.path, "to", sg.path, "records", len(fixes), "bytes", len(buf), "left", old.live)
	return true, nil
}

// dropOldest takes the oldest segment, which holds nothing live, out of
// the WAL: renamed to a spare (spares.go) while there are fewer than
// maxSpares, else deleted. The directory is fsynced at once: were the
// removal lost in a crash while a later one survived, Open would find a
// hole in the sequence.
func (s *Store) dropOldest() error {
	sg := s.segs[0]
	s.mu.Lock()
	s.segs = s.segs[1:]
	s.diskBytes -= sg.size
	s.mu.Unlock()
	kept, err := s.retire(sg)
	sg.release()
	if err != nil {
		return fmt.Errorf("walstore: removing %s: %w", sg.path, err)
	}
	if err := s.syncDir(); err != nil {
		return err
	}
	s.logger.Debug("walstore: segment left the WAL", "file", sg.path, "bytes", sg.size, "kept as a spare", kept)
	return nil
}
