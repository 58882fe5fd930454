package walstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// recover rebuilds the index from the segments in one sequential pass and
// leaves the last segment open for appending. Called by Open before the
// writer starts, so it touches writer state freely.
//
// Replay does not assume that a group's entries arrive in index order:
// relocation copies an idle group's old entries after newer ones, and
// segments whose records were all dead are gone. Each group is therefore
// rebuilt as sorted runs of locations where an entry record sets its
// index, a delete-range record clears its range and a drop record clears
// the group; once every segment is read each group must be a single run
// again (see doc.go for why).
func (s *Store) recover() error {
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("walstore: listing %s: %w", s.dir, err)
	}
	var seqs []uint32
	for _, e := range ents {
		if seq, ok := parseSegName(e.Name()); ok {
			seqs = append(seqs, seq)
		} else if n, ok := parseSpareName(e.Name()); ok {
			if err := s.keepSpare(e.Name(), n); err != nil {
				return err
			}
		}
	}
	slices.Sort(seqs)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			return fmt.Errorf("walstore: %s: segments %d..%d missing", s.dir, seqs[i-1]+1, seqs[i]-1)
		}
	}
	rp := &replay{s: s, groups: make(map[string]*replayGroup)}
	for i, seq := range seqs {
		if err := s.replaySegment(seq, i == len(seqs)-1, rp); err != nil {
			return err
		}
	}
	if len(s.segs) == 0 {
		next := uint32(1)
		if len(seqs) > 0 {
			next = seqs[len(seqs)-1] + 1
		}
		sg, err := s.createSegment(next)
		if err != nil {
			return err
		}
		s.segs = append(s.segs, sg)
		if err := sg.f.Sync(); err != nil {
			return fmt.Errorf("walstore: syncing %s: %w", sg.path, err)
		}
		if err := s.syncDir(); err != nil {
			return err
		}
	}
	for _, sg := range s.segs {
		s.diskBytes += sg.size
	}
	return rp.finish()
}

// replaySegment reads one segment. Damage in the last segment is a torn
// write from a crash (nothing after the last fsync was acknowledged) and
// is cut off; damage anywhere else is lost acknowledged data and fails
// Open with the file and offset.
func (s *Store) replaySegment(seq uint32, last bool, rp *replay) error {
	path := filepath.Join(s.dir, segName(seq))
	f, err := s.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("walstore: opening %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("walstore: %s: %w", path, err)
	}
	size := st.Size()
	hdr := make([]byte, segHeaderLen)
	n, _ := f.ReadAt(hdr, 0)
	salt, err := checkSegHeader(hdr[:n], uint64(seq))
	if err != nil {
		// The header is written with the segment's first batch and synced
		// with it; a bad one on the last segment is a crash during the roll
		// (of a new file, or of a spare whose records, an earlier life's,
		// do not carry this sequence's salt), unless a valid record follows
		// (then it is damage to real data).
		if !last || validRecordAt(f, segHeaderLen, size, segSalt(seq)) {
			f.Close()
			return fmt.Errorf("walstore: %s offset 0: %w", path, err)
		}
		f.Close()
		s.logger.Warn("walstore: removing segment torn while being created", "file", path, "size", size)
		if err := s.fs.Remove(path); err != nil {
			return fmt.Errorf("walstore: removing %s: %w", path, err)
		}
		return s.syncDir()
	}
	sg := newSegment(seq, path, f, segHeaderLen)
	sg.salt = salt
	s.segs = append(s.segs, sg)

	br := bufio.NewReaderSize(io.NewSectionReader(f, segHeaderLen, size-segHeaderLen), 1<<20)
	off := int64(segHeaderLen)
	var buf []byte
	var damage error
	for off < size {
		if size-off < recHeaderLen {
			damage = errShortRecord
			break
		}
		buf = slices.Grow(buf[:0], frameLen)[:frameLen]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("walstore: reading %s at %d: %w", path, off, err)
		}
		n, err := recordSize(buf)
		if err == nil && int64(n) > size-off {
			err = errShortRecord
		}
		if err != nil {
			damage = err
			break
		}
		buf = slices.Grow(buf, n-frameLen)[:n]
		if _, err := io.ReadFull(br, buf[frameLen:]); err != nil {
			return fmt.Errorf("walstore: reading %s at %d: %w", path, off, err)
		}
		rec, err := parseRecord(buf, salt)
		if errors.Is(err, errBadPayload) {
			// The checksum matched: this is no torn write but a record
			// this version cannot read. Never guess past it.
			return fmt.Errorf("walstore: %s offset %d: %w", path, off, err)
		}
		if err != nil {
			damage = err
			break
		}
		if err := rp.apply(rec, loc{seg: seq, off: uint32(off), n: uint32(n)}); err != nil {
			return fmt.Errorf("walstore: %s offset %d: %w", path, off, err)
		}
		off += int64(n)
	}
	sg.size = off
	if damage == nil {
		return nil
	}
	if !last {
		return fmt.Errorf("walstore: %s: corrupt record at offset %d: %w", path, off, damage)
	}
	s.logger.Warn("walstore: cutting torn tail", "file", path, "offset", off, "bytes", size-off, "reason", damage)
	if err := f.Truncate(off); err != nil {
		return fmt.Errorf("walstore: truncating %s at %d: %w", path, off, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("walstore: syncing %s: %w", path, err)
	}
	return nil
}

// validRecordAt reports whether a whole, checksummed record starts at off.
func validRecordAt(f io.ReaderAt, off, size int64, salt uint32) bool {
	if size-off < recHeaderLen {
		return false
	}
	frame := make([]byte, frameLen)
	if _, err := f.ReadAt(frame, off); err != nil {
		return false
	}
	n, err := recordSize(frame)
	if err != nil || int64(n) > size-off {
		return false
	}
	rec := make([]byte, n)
	if _, err := f.ReadAt(rec, off); err != nil {
		return false
	}
	_, err = parseRecord(rec, salt)
	return err == nil
}

// replay is the index under construction.
type replay struct {
	s      *Store
	groups map[string]*replayGroup
}

type replayGroup struct {
	runs   []run // sorted by first, disjoint, not adjacent
	stable []stableKV
}

type run struct {
	first uint64
	locs  []loc
}

func (rp *replay) apply(rec record, at loc) error {
	s := rp.s
	rg := rp.groups[string(rec.group)]
	switch rec.kind {
	case kindEntry:
		if rg == nil {
			rg = &replayGroup{}
			rp.groups[string(rec.group)] = rg
		}
		rg.set(s, entryIndex(rec.payload), at)
	case kindDelete:
		if rg != nil {
			lo, hi := decodeDelete(rec.payload)
			rg.deleteRange(s, lo, hi)
		}
	case kindStable:
		if rg == nil {
			rg = &replayGroup{}
			rp.groups[string(rec.group)] = rg
		}
		key, val := decodeStable(rec.payload)
		kv := stableKV{key: string(key), val: slices.Clone(val), at: at}
		if kv.val == nil {
			kv.val = []byte{}
		}
		s.addLive(s.segmentAt(at.seg), int64(at.n))
		found := false
		for i := range rg.stable {
			if rg.stable[i].key == kv.key {
				s.unlive(rg.stable[i].at)
				rg.stable[i] = kv
				found = true
				break
			}
		}
		if !found {
			rg.stable = append(rg.stable, kv)
		}
	case kindDrop:
		if rg != nil {
			for _, r := range rg.runs {
				for _, l := range r.locs {
					s.unlive(l)
				}
			}
			for _, kv := range rg.stable {
				s.unlive(kv.at)
			}
			delete(rp.groups, string(rec.group))
		}
	}
	return nil
}

// set records that index i lives at l, replacing an older copy.
func (rg *replayGroup) set(s *Store, i uint64, l loc) {
	s.addLive(s.segmentAt(l.seg), int64(l.n))
	runs := rg.runs
	// k = number of runs starting at or before i; appends hit the last run.
	k := len(runs)
	if k > 0 && runs[k-1].first > i {
		k = sort.Search(len(runs), func(j int) bool { return runs[j].first > i })
	}
	if k > 0 {
		r := &runs[k-1]
		end := r.first + uint64(len(r.locs))
		if i < end {
			s.unlive(r.locs[i-r.first])
			r.locs[i-r.first] = l
			return
		}
		if i == end {
			r.locs = append(r.locs, l)
			if k < len(runs) && runs[k].first == i+1 {
				r.locs = append(r.locs, runs[k].locs...)
				rg.runs = slices.Delete(runs, k, k+1)
			}
			return
		}
	}
	if k < len(runs) && runs[k].first == i+1 {
		runs[k].locs = slices.Insert(runs[k].locs, 0, l)
		runs[k].first = i
		return
	}
	rg.runs = slices.Insert(runs, k, run{first: i, locs: []loc{l}})
}

func (rg *replayGroup) deleteRange(s *Store, lo, hi uint64) {
	if lo > hi {
		return
	}
	out := rg.runs[:0:0]
	for _, r := range rg.runs {
		end := r.first + uint64(len(r.locs)) - 1
		if hi < r.first || lo > end {
			out = append(out, r)
			continue
		}
		a, b := max(lo, r.first), min(hi, end)
		for _, l := range r.locs[a-r.first : b-r.first+1] {
			s.unlive(l)
		}
		if a > r.first {
			// Capped so that appending to it cannot overwrite the right part.
			out = append(out, run{first: r.first, locs: r.locs[: a-r.first : a-r.first]})
		}
		if b < end {
			out = append(out, run{first: b + 1, locs: r.locs[b+1-r.first:]})
		}
	}
	rg.runs = out
}

// finish installs the replayed groups. A group still in several runs has
// lost entries in the middle, which no sequence of acknowledged
// operations can produce: refuse rather than serve a log with a hole.
func (rp *replay) finish() error {
	for name, rg := range rp.groups {
		if len(rg.runs) > 1 {
			r0, r1 := rg.runs[0], rg.runs[1]
			return fmt.Errorf("walstore: %s: group %q has entries %d..%d and %d.. but not those between",
				rp.s.dir, name, r0.first, r0.first+uint64(len(r0.locs))-1, r1.first)
		}
		g := &group{stable: rg.stable}
		if len(rg.runs) == 1 {
			g.first, g.locs = rg.runs[0].first, rg.runs[0].locs
			if cap(g.locs) > 2*len(g.locs)+16 {
				g.locs = slices.Clone(g.locs)
			}
			g.wfirst, g.wlast = g.first, g.last()
		}
		if g.empty() {
			continue
		}
		rp.s.groups[name] = g
	}
	return nil
}
