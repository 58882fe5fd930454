package memory

import "testing"

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
	var b Buffers
	for _, n := range []int{1, 4096, 5000, 1 << 20, 3<<20 + 7, 64 << 20, 65 << 20} {
		buf := b.Get(n)
		if len(buf) != n {
			t.Fatalf("Get(%d): length %d", n, len(buf))
		}
		if c := classOf(n); c >= 0 && cap(buf) != classSize(c) {
			t.Fatalf("Get(%d): capacity %d, want %d", n, cap(buf), classSize(c))
		}
		b.Put(buf)
	}
	// A foreign buffer is never handed out.
	b.Put(make([]byte, 5000))
	if buf := b.Get(5000); cap(buf) != classSize(classOf(5000)) {
		t.Fatalf("a foreign buffer came back: cap %d", cap(buf))
	}
}

func BenchmarkBuffersGetPut(b *testing.B) {
	var p Buffers
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Put(p.Get(64 << 10))
	}
}
