package log

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// WriteVectorAt leaves exactly what one WriteAt of the concatenation
// would, with more buffers than one pwritev takes, empty ones among them,
// through an *os.File and through any other File.
func TestWriteVectorAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, count := range []int{0, 1, 2, 7, maxIOV + 1, 3*maxIOV + 5} {
		bufs := make([][]byte, count)
		var want []byte
		for i := range bufs {
			b := make([]byte, rng.IntN(300))
			if i%17 == 3 {
				b = b[:0]
			}
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			bufs[i] = b
			want = append(want, b...)
		}
		kept := make([][]byte, len(bufs))
		copy(kept, bufs)
		for _, wrap := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "f")
			osf, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			var f File = osf
			if wrap {
				f = struct{ File }{osf} // not an *os.File: one WriteAt per buffer
			}
			const off = 100
			n, err := WriteVectorAt(f, bufs, off)
			if err != nil {
				t.Fatalf("%d buffers (wrapped %v): %v", count, wrap, err)
			}
			if n != int64(len(want)) {
				t.Fatalf("%d buffers (wrapped %v): wrote %d bytes, want %d", count, wrap, n, len(want))
			}
			osf.Close()
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) > 0 && !bytes.Equal(got[off:], want) {
				t.Fatalf("%d buffers (wrapped %v): file differs from the concatenation", count, wrap)
			}
			for i := range bufs {
				if len(bufs[i]) != len(kept[i]) {
					t.Fatalf("%d buffers: buffer %d was resliced", count, i)
				}
			}
		}
	}
}
