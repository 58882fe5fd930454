package coalescer

import (
	"encoding/binary"
	"math/bits"
)

// Key identifies one partition read. Reads share only when every field is
// equal.
type Key struct {
	TopicID   [16]byte
	Partition int32
	Offset    int64
	// MaxBytes is the byte limit this read uses.
	MaxBytes int32
	// Isolation is 0 for read_uncommitted, 1 for read_committed.
	Isolation int8
	// Obligatory reads return the first batch whole even when it exceeds
	// MaxBytes; strict reads do not. The two never serve each other.
	Obligatory bool
}

// Mixing constants of wyhash: odd, with well spread bits, so a multiply
// folds every input bit into the result.
const (
	mix0 = 0xa0761d6478bd642f
	mix1 = 0xe7037ed1a0b428db
	mix2 = 0x8ebc6af09c88c6e3
	mix3 = 0x589965cc75374cc3
)

// mum folds the 128-bit product of a and b into 64 bits.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// partitionHash covers only the topic id and partition, so that every read
// of a partition lands on the same shard.
func (k *Key) partitionHash() uint64 {
	t0 := binary.LittleEndian.Uint64(k.TopicID[:8])
	t1 := binary.LittleEndian.Uint64(k.TopicID[8:])
	h := mum(t0^mix0, t1^mix1)
	return mum(h^uint64(uint32(k.Partition))^mix2, mix3)
}

// hash covers every field, so that the reads of one partition spread over
// the buckets of its shard's index.
func (k *Key) hash() uint64 {
	var flags uint64
	if k.Obligatory {
		flags = 1
	}
	limits := uint64(uint32(k.MaxBytes))<<32 | uint64(uint8(k.Isolation))<<8 | flags
	h := mum(k.partitionHash()^uint64(k.Offset), mix0)
	return mum(h^limits^mix1, mix2)
}

// reduce maps a hash onto [0, n) without a division and without favouring
// the low bits, which the multiply mixes least.
func reduce(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}
