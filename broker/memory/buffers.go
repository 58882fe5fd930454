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
// The free list is bounded (MaxHeld bytes) and, unlike a sync.Pool, the
// collector does not empty it, so buffers survive collections instead of
// being allocated again after each one. Its bytes stay charged to Budget:
// a holder that recycles a buffer hands its charge over with it, Get
// takes it back, and a reader that finds the budget short calls Lend to
// have the recycled buffers' bytes (and then the buffers) before it waits. Fetch memory in use plus
// recycled buffers therefore never exceed the budget.
//
// Classes are four per power of two (at most 19% larger than asked for)
// from 4 KiB to 64 MiB; other sizes are allocated and left to the garbage
// collector.
type Buffers struct {
	// Budget, when set, is charged for the bytes the free list holds.
	Budget *Pool
	// MaxHeld bounds the bytes the free list holds; 0 keeps none.
	MaxHeld int64

	mu    sync.Mutex
	free  [numClasses][][]byte // charged, by mu
	held  int64                // bytes in free, by mu
	lent  [numClasses][][]byte // uncharged, for the next Gets (Lend), by mu
	reuse int64                // Gets served from free or lent, by mu
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

// Get returns a buffer of length n; its capacity is its class's size, or
// up to twice that for a recycled one. A recycled buffer's charge goes
// back to the budget: the caller charges its capacity, as for a new one.
func (b *Buffers) Get(n int) []byte {
	c := classOf(n)
	if c < 0 {
		return make([]byte, n)
	}
	b.mu.Lock()
	// Reads under a short budget ask for sizes all over a power of two;
	// a buffer up to one power of two larger serves them too.
	for k := c; k < min(c+stepsPerShift+1, numClasses); k++ {
		if buf, ok := pop(&b.lent[k]); ok {
			b.reuse++
			b.mu.Unlock()
			return buf[:n]
		}
		if buf, ok := pop(&b.free[k]); ok {
			b.held -= int64(cap(buf))
			b.reuse++
			b.mu.Unlock()
			if b.Budget != nil {
				b.Budget.Release(int64(cap(buf)))
			}
			return buf[:n]
		}
	}
	b.mu.Unlock()
	return make([]byte, n, classSize(c))
}

// Recycle takes back a buffer from Get whose capacity its holder has
// charged to Budget; nothing may use it afterwards. Kept, it stays
// charged; dropped (the free list is full, or it is of no class), its
// charge is released.
func (b *Buffers) Recycle(buf []byte) {
	n := int64(cap(buf))
	c := classOf(cap(buf))
	if c >= 0 && cap(buf) == classSize(c) {
		b.mu.Lock()
		if b.held+n <= b.MaxHeld {
			b.free[c] = append(b.free[c], buf[:0])
			b.held += n
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
	if b.Budget != nil {
		b.Budget.Release(n)
	}
}

// Lend gives the budget back the bytes of recycled buffers, largest
// first, until n bytes were released or none is left, and returns the
// bytes released. The buffers stay at hand, uncharged, for the next Gets:
// a reader that found the budget short takes the bytes and then, as it
// reads, most likely the buffer too, instead of the buffer going to the
// collector and the reader allocating a new one. Buffers lent before and
// not taken since are dropped, so at most one lending's worth is ever
// uncharged.
func (b *Buffers) Lend(n int64) int64 {
	var released int64
	b.mu.Lock()
	for c := range b.lent {
		clear(b.lent[c])
		b.lent[c] = b.lent[c][:0]
	}
	for c := numClasses - 1; c >= 0 && released < n; c-- {
		for released < n {
			buf, ok := pop(&b.free[c])
			if !ok {
				break
			}
			released += int64(cap(buf))
			b.lent[c] = append(b.lent[c], buf)
		}
	}
	b.held -= released
	b.mu.Unlock()
	if b.Budget != nil && released > 0 {
		b.Budget.Release(released)
	}
	return released
}

// pop takes the last buffer of a free list.
func pop(list *[][]byte) ([]byte, bool) {
	k := len(*list)
	if k == 0 {
		return nil, false
	}
	buf := (*list)[k-1]
	(*list)[k-1] = nil
	*list = (*list)[:k-1]
	return buf, true
}

// BufferStats describe the free list.
type BufferStats struct {
	Held    int64 // bytes of recycled buffers held now
	MaxHeld int64
	Reused  int64 // Gets served from the free list since the start
}

// Stats reports the free list's state.
func (b *Buffers) Stats() BufferStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BufferStats{Held: b.held, MaxHeld: b.MaxHeld, Reused: b.reuse}
}
