package memory

import (
	"runtime"
	"testing"
)

func TestBufferClasses(t *testing.T) {
	prev := 0
	for c := range numClasses {
		size := classSize(c)
		if size <= prev {
			t.Fatalf("class %d size %d not above the previous %d", c, size, prev)
		}
		if classOf(size) != c || classOf(prev+1) != c {
			t.Fatalf("class %d (%d bytes): classOf(size) %d, classOf(prev+1) %d", c, size, classOf(size), classOf(prev+1))
		}
		if c > 0 && float64(size)/float64(prev+1) > 1.25 {
			t.Fatalf("class %d wastes more than a quarter: %d for %d", c, size, prev+1)
		}
		prev = size
	}
	if prev != 64<<20 {
		t.Fatalf("largest class %d, want 64 MiB", prev)
	}
	if classOf(64<<20+1) != -1 {
		t.Fatal("past the largest class is not pooled")
	}
}

func TestBuffersRecycle(t *testing.T) {
	b := Buffers{MaxHeld: 1 << 30}
	for _, n := range []int{1, 4096, 5000, 1 << 20, 3<<20 + 7, 64 << 20, 65 << 20} {
		buf := b.Get(n)
		if len(buf) != n {
			t.Fatalf("Get(%d): length %d", n, len(buf))
		}
		if c := classOf(n); c >= 0 && cap(buf) != classSize(c) {
			t.Fatalf("Get(%d): capacity %d, want %d", n, cap(buf), classSize(c))
		}
		b.Recycle(buf)
	}
	// A foreign buffer is never handed out.
	b.Recycle(make([]byte, 5000))
	if buf := b.Get(5000); cap(buf) != classSize(classOf(5000)) {
		t.Fatalf("a foreign buffer came back: cap %d", cap(buf))
	}
}

func TestRecycledBuffersSurviveCollections(t *testing.T) {
	b := Buffers{MaxHeld: 1 << 20}
	buf := b.Get(64 << 10)
	buf[0] = 7
	first := &buf[:1][0]
	b.Recycle(buf)
	runtime.GC()
	runtime.GC() // a sync.Pool is empty after two
	again := b.Get(60 << 10)
	if &again[:1][0] != first {
		t.Fatal("the recycled buffer was not reused after two collections")
	}
	if st := b.Stats(); st.Held != 0 || st.Reused != 1 {
		t.Fatalf("stats %+v, want nothing held and one reuse", st)
	}
}

func TestRecycledBuffersStayChargedToTheBudgetAndAreBounded(t *testing.T) {
	const size = 64 << 10 // a class size
	budget := NewPool(1 << 20)
	b := Buffers{Budget: budget, MaxHeld: 2 * size}
	used := func() int64 { return budget.Stats().Used }

	var bufs [][]byte
	for range 3 {
		buf := b.Get(size)
		budget.Charge(int64(cap(buf))) // as a reader charges what it keeps
		bufs = append(bufs, buf)
	}
	for _, buf := range bufs {
		b.Recycle(buf)
	}
	// Two kept (their charge with them), the third past MaxHeld dropped.
	if st := b.Stats(); st.Held != 2*size || used() != 2*size {
		t.Fatalf("held %d, budget used %d; want %d both", st.Held, used(), 2*size)
	}
	// Get hands a kept buffer back with its charge released: the reader
	// charges it again.
	buf := b.Get(size)
	if used() != size {
		t.Fatalf("budget used %d after Get, want %d", used(), size)
	}
	budget.Charge(int64(cap(buf)))
	b.Recycle(buf)
	if used() != 2*size {
		t.Fatalf("budget used %d, want %d", used(), 2*size)
	}
	// A reader short of budget has the kept buffers' bytes lent to it,
	// and then, uncharged, the buffer itself.
	if got := b.Lend(1); got != size {
		t.Fatalf("Lend(1) released %d, want one buffer (%d)", got, size)
	}
	if st := b.Stats(); st.Held != size || used() != size {
		t.Fatalf("after lending one: held %d, budget used %d; want %d both", st.Held, used(), size)
	}
	lent := b.Get(size)
	if used() != size {
		t.Fatalf("taking the lent buffer changed the budget: used %d, want %d", used(), size)
	}
	if st := b.Stats(); st.Held != size || st.Reused != 2 {
		t.Fatalf("stats %+v: the lent buffer must serve the Get", st)
	}
	budget.Charge(int64(cap(lent)))
	b.Recycle(lent)
	if got := b.Lend(1 << 30); got != 2*size {
		t.Fatalf("Lend(all) released %d, want %d", got, 2*size)
	}
	if st := b.Stats(); st.Held != 0 || used() != 0 {
		t.Fatalf("after lending everything: held %d, budget used %d", st.Held, used())
	}
	// A second lending drops what the first lent and nobody took.
	b.Lend(1)
	b.mu.Lock()
	lentNow := 0
	for c := range b.lent {
		lentNow += len(b.lent[c])
	}
	b.mu.Unlock()
	if lentNow != 0 {
		t.Fatalf("%d lent buffers kept past the next lending", lentNow)
	}
}

func BenchmarkBuffersGetRecycle(b *testing.B) {
	p := Buffers{MaxHeld: 1 << 20}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Recycle(p.Get(64 << 10))
	}
}

func TestRecycledBufferServesSmallerRequestsWithinAPowerOfTwo(t *testing.T) {
	b := Buffers{MaxHeld: 1 << 30}
	big := b.Get(1 << 20)
	b.Recycle(big)
	if got := b.Get(600 << 10); cap(got) != 1<<20 {
		t.Fatalf("Get(600 KiB) after recycling 1 MiB: cap %d, want the recycled 1 MiB", cap(got))
	} else {
		b.Recycle(got)
	}
	if got := b.Get(400 << 10); cap(got) == 1<<20 {
		t.Fatal("a buffer more than twice the size asked for was handed out")
	}
}
