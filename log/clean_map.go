package log

import "hash/maphash"

// offsetMap is the cleaner's key -> latest offset map over a dirty
// section (Kafka's SkimpyOffsetMap). Keys are stored as 128-bit hashes
// (two independently seeded maphash values), so an entry has a fixed
// size whatever the key length; two keys colliding would make the
// cleaner drop the older one's record, which at 128 bits is as unlikely
// as in Kafka's MD5-based map. The map lives only for one pass, so the
// per-process seeds never reach the disk.
type offsetMap struct {
	s1, s2 maphash.Seed
	m      map[keyHash]int64
	limit  int // entries the memory bound allows
}

type keyHash [2]uint64

// offsetMapEntryBytes is the memory one entry is charged: the 16-byte
// hash and the 8-byte offset, plus the Go map's slot overhead and growth
// slack at a typical load.
const offsetMapEntryBytes = 48

func newOffsetMap(bufferBytes int64) *offsetMap {
	limit := max(int(bufferBytes/offsetMapEntryBytes), 1)
	return &offsetMap{s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), m: make(map[keyHash]int64, min(limit, 1<<16)), limit: limit}
}

func (m *offsetMap) hash(key []byte) keyHash {
	return keyHash{maphash.Bytes(m.s1, key), maphash.Bytes(m.s2, key)}
}

// put records offset as key's latest (offsets only grow while a map is
// built).
func (m *offsetMap) put(key []byte, offset int64) { m.m[m.hash(key)] = offset }

// putMax records offset for the key hashed to h unless a later one is
// there: a transaction's keys come in at its commit marker, after later
// records of other producers may have.
func (m *offsetMap) putMax(h keyHash, offset int64) {
	if o, ok := m.m[h]; !ok || offset > o {
		m.m[h] = offset
	}
}

// get returns key's latest offset in the dirty section.
func (m *offsetMap) get(key []byte) (int64, bool) {
	o, ok := m.m[m.hash(key)]
	return o, ok
}

func (m *offsetMap) len() int { return len(m.m) }

// room reports whether n more distinct keys fit.
func (m *offsetMap) room(n int) bool { return len(m.m)+n <= m.limit }
