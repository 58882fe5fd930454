package walstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	hraft "github.com/hashicorp/raft"
)

// loc is where a record lives: 12 bytes per stored entry is the whole
// per-entry memory cost.
type loc struct {
	seg uint32
	off uint32
	n   uint32 // whole record, frame included
}

type stableKV struct {
	key string
	val []byte
	at  loc
}

// group is one Raft group's index. An idle group with a few entries costs
// this struct, its map slot, its locations and its stable values: a few
// hundred bytes.
type group struct {
	// Published state, changed by the writer under Store.mu after the
	// records are synced; read by GroupStore under RLock.
	first  uint64 // index of locs[0]; 0 when locs is empty
	locs   []loc
	stable []stableKV // a handful of keys (term, vote); a slice beats a map
	// tail is the last entry's record when it is small (tailCacheMax),
	// else nil. An idle leader reads its last entry for every keep-alive
	// it sends a follower (hashicorp/raft's setPreviousLog): thousands of
	// idle groups would each pay a pread several times a second.
	tail []byte

	// Writer-only view including records validated but not yet synced:
	// validation of the next request must see the ones before it.
	wfirst, wlast uint64
	mark          uint64 // last batch that counted this group
}

func (g *group) last() uint64 {
	if len(g.locs) == 0 {
		return 0
	}
	return g.first + uint64(len(g.locs)) - 1
}

func (g *group) empty() bool { return len(g.locs) == 0 && len(g.stable) == 0 }

func stableAt[K string | []byte](g *group, key K) int {
	for i := range g.stable {
		if g.stable[i].key == string(key) {
			return i
		}
	}
	return -1
}

// GroupStore is one group's view of the Store. It implements
// hraft.LogStore, hraft.StableStore and hraft.MonotonicLogStore.
type GroupStore struct {
	s    *Store
	name string
	err  error   // invalid name
	hand handOff // entries a follower stored, held for its apply (handoff.go)
}

var (
	_ hraft.LogStore          = (*GroupStore)(nil)
	_ hraft.StableStore       = (*GroupStore)(nil)
	_ hraft.MonotonicLogStore = (*GroupStore)(nil)
)

// IsMonotonic tells Raft the log never has gaps, so after installing a
// snapshot it deletes the whole log instead of leaving a gap.
func (gs *GroupStore) IsMonotonic() bool { return true }

// FirstIndex returns the first stored index, 0 when the log is empty.
func (gs *GroupStore) FirstIndex() (uint64, error) {
	if gs.err != nil {
		return 0, gs.err
	}
	s := gs.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	if g := s.groups[gs.name]; g != nil {
		return g.first, nil
	}
	return 0, nil
}

// LastIndex returns the last stored index, 0 when the log is empty.
func (gs *GroupStore) LastIndex() (uint64, error) {
	if gs.err != nil {
		return 0, gs.err
	}
	s := gs.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	if g := s.groups[gs.name]; g != nil {
		return g.last(), nil
	}
	return 0, nil
}

// GetLog reads entry index into l; hraft.ErrLogNotFound if it is not
// stored. l's Data and Extensions are the caller's: freshly allocated, or
// the slices StoreLogsHandOff was given, handed out once (handoff.go).
func (gs *GroupStore) GetLog(index uint64, l *hraft.Log) error {
	if gs.err != nil {
		return gs.err
	}
	s := gs.s
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	g := s.groups[gs.name]
	if g == nil || index < g.first || index > g.last() || len(g.locs) == 0 {
		s.mu.RUnlock()
		return hraft.ErrLogNotFound
	}
	if gs.hand.take(s, index, l) {
		s.mu.RUnlock()
		return nil
	}
	if tail := g.tail; tail != nil && index == g.last() {
		// Copied: the decoded Log's slices alias the buffer, and Raft
		// may keep them.
		buf := slices.Clone(tail)
		s.mu.RUnlock()
		rec, err := parseRecord(buf, 0)
		if err != nil {
			return fmt.Errorf("walstore: cached entry of group %q index %d: %w", gs.name, index, err)
		}
		return decodeEntry(rec.payload, l)
	}
	at := g.locs[index-g.first]
	sg := s.segmentAt(at.seg)
	if sg == nil {
		s.mu.RUnlock()
		return fmt.Errorf("walstore: group %q index %d: segment %d missing", gs.name, index, at.seg)
	}
	sg.acquireRead()
	s.mu.RUnlock()

	buf := make([]byte, at.n)
	n, err := len(buf), error(nil)
	if s.ring.read(at.seg, buf, int64(at.off)) {
		s.ringReads.Add(1)
		if s.met != nil {
			s.met.ringReads.Inc()
		}
	} else {
		n, err = sg.f.ReadAt(buf, int64(at.off))
		s.fileReads.Add(1)
		if s.met != nil {
			s.met.fileReads.Inc()
		}
	}
	sg.releaseRead()
	if n == len(buf) {
		err = nil
	} else if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return fmt.Errorf("walstore: reading %s at %d: %w", sg.path, at.off, err)
	}
	rec, err := parseRecord(buf, sg.salt)
	if err == nil && (rec.kind != kindEntry || string(rec.group) != gs.name || entryIndex(rec.payload) != index) {
		err = errBadPayload
	}
	if err != nil {
		return fmt.Errorf("walstore: %s offset %d (group %q index %d): %w", sg.path, at.off, gs.name, index, err)
	}
	return decodeEntry(rec.payload, l)
}

// StoreLog stores one entry; see StoreLogs.
func (gs *GroupStore) StoreLog(l *hraft.Log) error {
	return gs.StoreLogs([]*hraft.Log{l})
}

// StoreLogs appends entries, which must be consecutive and follow
// LastIndex (any first index when the log is empty). It returns once
// they are fsynced; only then can GetLog see them.
func (gs *GroupStore) StoreLogs(logs []*hraft.Log) error {
	if gs.err != nil {
		return gs.err
	}
	if len(logs) == 0 {
		return nil
	}
	first := logs[0].Index
	if first == 0 {
		return fmt.Errorf("%w: group %q: index 0", ErrNotContiguous, gs.name)
	}
	for i, l := range logs {
		if l.Index != first+uint64(i) {
			return fmt.Errorf("%w: group %q: index %d after %d in one StoreLogs", ErrNotContiguous, gs.name, l.Index, logs[i-1].Index)
		}
		if len(l.Data)+len(l.Extensions) > maxRecordLen-recHeaderLen-maxNameLen-entryFixedLen-binary.MaxVarintLen64 {
			return fmt.Errorf("walstore: group %q index %d: entry too large", gs.name, l.Index)
		}
	}
	r := gs.s.getRequest(kindEntry, gs.name)
	r.lo, r.hi = first, first+uint64(len(logs))-1
	// Sized once, so that appending never moves buf (parts point into
	// it) and nothing is copied twice.
	n, size := 0, 0
	for _, l := range logs {
		rec := entryRecordLen(gs.name, l)
		size += rec
		if len(l.Data) >= inlineDataMin {
			rec -= len(l.Data)
		}
		n += rec
	}
	r.buf = slices.Grow(r.buf[:0], n)
	mark := 0 // where the part of buf not yet in parts starts
	for _, l := range logs {
		start := len(r.buf)
		if len(l.Data) < inlineDataMin {
			r.buf = appendEntryRecord(r.buf, gs.name, l)
			r.lens = append(r.lens, uint32(len(r.buf)-start))
			continue
		}
		r.buf = appendEntryHeader(r.buf, gs.name, l)
		r.lens = append(r.lens, uint32(len(r.buf)-start+len(l.Data)))
		r.parts = append(r.parts, r.buf[mark:], l.Data)
		mark = len(r.buf)
	}
	if len(r.parts) > 0 {
		if mark < len(r.buf) {
			r.parts = append(r.parts, r.buf[mark:])
		}
		r.size = size
	}
	return gs.s.submit(r)
}

// DeleteRange removes entries min..max inclusive: a head (compaction), a
// tail (conflict truncation) or everything. Ranges outside the log are
// no-ops; a range strictly inside it is refused, as it would leave a gap.
func (gs *GroupStore) DeleteRange(min, max uint64) error {
	if gs.err != nil {
		return gs.err
	}
	if min > max {
		return nil
	}
	gs.hand.drop(gs.s, min, max)
	r := gs.s.getRequest(kindDelete, gs.name)
	r.lo, r.hi = min, max
	r.buf = appendDeleteRecord(r.buf, gs.name, min, max)
	return gs.s.submit(r)
}

// Set durably stores key = val for the group.
func (gs *GroupStore) Set(key, val []byte) error {
	if gs.err != nil {
		return gs.err
	}
	if len(key) > maxKeyLen || len(val) > maxRecordLen/2 {
		return fmt.Errorf("walstore: group %q: stable key or value too large", gs.name)
	}
	r := gs.s.getRequest(kindStable, gs.name)
	r.key = string(key)
	r.val = append(r.val[:0], val...)
	r.buf = appendStableRecord(r.buf, gs.name, key, val)
	return gs.s.submit(r)
}

// Get returns key's value; an error reading exactly "not found" if unset.
func (gs *GroupStore) Get(key []byte) ([]byte, error) {
	if gs.err != nil {
		return nil, gs.err
	}
	s := gs.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	g := s.groups[gs.name]
	if g == nil {
		return nil, errNotFound
	}
	i := stableAt(g, key)
	if i < 0 {
		return nil, errNotFound
	}
	return append([]byte{}, g.stable[i].val...), nil
}

// SetUint64 stores val as 8 big-endian bytes under key.
func (gs *GroupStore) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], val)
	return gs.Set(key, b[:])
}

// GetUint64 returns key's value as set by SetUint64; (0, "not found") if
// unset.
func (gs *GroupStore) GetUint64(key []byte) (uint64, error) {
	v, err := gs.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("walstore: group %q key %q: %d-byte value is not a uint64", gs.name, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
