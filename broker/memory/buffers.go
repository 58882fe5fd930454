package memory

import (
	"math/bits"
	"sync"
)

// Buffers recycles byte buffers by size class, for memory with a known
// end of life: the fetch path returns a read's buffer once the response
// holding it is written (or, for a read shared by the coalescer, once the
// last response is). Under a fetch storm that turns gigabytes a second of
// garbage into a working set the size of what is in flight, which is what
// lets the fetch budget bound the process's memory and not only its live
// data.
//
// Classes are four per power of two (at most 19% larger than asked for)
// from 4 KiB to 64 MiB; other sizes are allocated and left to the garbage
// collector.
type Buffers struct {
	classes [numClasses]sync.Pool // of *[]byte
	boxes   sync.Pool             // empty *[]byte, so that Put allocates nothing
}

const (
	minClassShift = 12 // 4 KiB
	maxClassShift = 26 // 64 MiB
	stepsPerShift = 4
	numClasses    = (maxClassShift-minClassShift)*stepsPerShift + 1
)

// classSize is the capacity of class c.
func classSize(c int) int {
	shift, step := minClassShift+c/stepsPerShift, c%stepsPerShift
	return (1 << shift) + step*(1<<shift)/stepsPerShift
}

// classOf is the smallest class holding n bytes, or -1 past the largest.
func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	if n > 1<<maxClassShift {
		return -1
	}
	shift := bits.Len(uint(n-1)) - 1 // 2^shift < n <= 2^(shift+1)
	quarter := (1 << shift) / stepsPerShift
	step := (n - (1 << shift) + quarter - 1) / quarter // 1..4
	return (shift-minClassShift)*stepsPerShift + step
}

// Get returns a buffer of length n; its capacity is its class's size.
func (b *Buffers) Get(n int) []byte {
	c := classOf(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := b.classes[c].Get().(*[]byte); ok {
		buf := (*p)[:n]
		*p = nil
		b.boxes.Put(p)
		return buf
	}
	return make([]byte, n, classSize(c))
}

// Put gives back a buffer from Get; nothing may use it afterwards.
// Buffers of no class's capacity are left to the garbage collector.
func (b *Buffers) Put(buf []byte) {
	c := classOf(cap(buf))
	if c < 0 || cap(buf) != classSize(c) {
		return
	}
	p, ok := b.boxes.Get().(*[]byte)
	if !ok {
		p = new([]byte)
	}
	*p = buf[:0]
	b.classes[c].Put(p)
}
