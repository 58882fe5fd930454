package log

import (
	"testing"
)

func benchmarkAppend(b *testing.B, valueLen int) {
	cfg := testConfig(nil)
	cfg.IndexIntervalBytes = 4096
	l := mustOpen(b, b.TempDir(), cfg)
	defer l.Close()
	batch := simpleBatch(b, 1, 1, valueLen)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := l.Append(batch, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	b.Run("1KiB", func(b *testing.B) { benchmarkAppend(b, 1024-80) })
	b.Run("16KiB", func(b *testing.B) { benchmarkAppend(b, 16*1024-80) })
}

// BenchmarkRead reads the log sequentially in 1 MiB obligatory fetches, as a
// catching-up consumer does.
func BenchmarkRead(b *testing.B) {
	cfg := testConfig(nil)
	cfg.IndexIntervalBytes = 4096
	l := mustOpen(b, b.TempDir(), cfg)
	defer l.Close()
	batch := simpleBatch(b, 4, 1, 1000)
	for l.Size() < 64<<20 {
		if _, err := l.Append(batch, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	b.ReportAllocs()
	b.ResetTimer()
	var off int64
	var n int64
	for b.Loop() {
		if off >= end {
			off = 0
		}
		out, err := l.Read(off, 1<<20, Obligatory, end)
		if err != nil {
			b.Fatal(err)
		}
		n += int64(len(out))
		off += int64(len(out)/len(batch)) * 4
	}
	b.SetBytes(n / int64(b.N))
}
