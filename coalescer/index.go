package coalescer

import "unsafe"

// ways is the associativity of the index: a key may live in any of the
// ways of its bucket, so a few hot keys colliding on a bucket do not evict
// each other.
const ways = 8

// slot is one index entry. It is exactly 64 bytes, one cache line, so a
// bucket scan touches ways lines and no slot straddles two.
type slot struct {
	key Key
	// flight is set while the key's read is in flight; waiters join it.
	flight *flight
	// result is set once the read completed with data. The slot owns no
	// reference to it: it stays findable only while some holder keeps it
	// alive.
	result *Result
	// used orders ready slots by recency for eviction.
	used uint64
}

// slotSize is the memory one slot takes in the index.
const slotSize = int(unsafe.Sizeof(slot{}))

func (s *slot) occupied() bool { return s.flight != nil || s.result != nil }

// reclaimable reports whether the slot can be reused without harming
// anyone: nothing is waiting on it and nobody holds its result.
func (s *slot) reclaimable() bool {
	return s.flight == nil && (s.result == nil || s.result.refs.Load() <= 0)
}

// index is a shard's fixed-size, set-associative cache index. It is guarded
// by the shard's mutex.
type index struct {
	slots   []slot
	buckets int
}

// bucketsFor is how many buckets fit in indexBytes, at least one.
func bucketsFor(indexBytes int) int {
	return max(indexBytes/(slotSize*ways), 1)
}

func newIndex(indexBytes int) *index {
	n := bucketsFor(indexBytes)
	return &index{slots: make([]slot, n*ways), buckets: n}
}

// bucket returns the ways key may occupy, and the position of the first.
func (x *index) bucket(key *Key) (bucket []slot, base int) {
	base = reduce(key.hash(), x.buckets) * ways
	return x.slots[base : base+ways : base+ways], base
}

// probe finds key's slot, or else the slot a new entry for key should
// take. It returns the position of the match (-1 if none) and of the
// victim (-1 if every way is in flight, when the read must go uncached).
// The victim is the first reclaimable way; failing that, the least recently
// used ready way, whose holders keep their references.
func (x *index) probe(key *Key) (match, victim int) {
	bucket, base := x.bucket(key)
	victim = -1
	var oldest uint64
	reclaimed := false
	for i := range bucket {
		s := &bucket[i]
		if s.occupied() && s.key == *key {
			return base + i, -1
		}
		if reclaimed {
			continue
		}
		switch {
		case s.reclaimable():
			victim, reclaimed = base+i, true
		case s.flight == nil && (victim < 0 || s.used < oldest):
			victim, oldest = base+i, s.used
		}
	}
	return -1, victim
}
