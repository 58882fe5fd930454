package log

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"
)

// BenchmarkClean cleans a log of keyed records, 10% of them with distinct
// keys, 100-byte values, batches of 10, 1 MiB segments: 100,000 records
// (12.5 MB) by default, WEIR_CLEAN_BENCH_RECORDS others (10,000,000 is
// about 1.2 GB). Beside MB/s it reports the cleaner's peak heap growth
// (sampled every 5 ms) against its dedupe buffer.
func BenchmarkClean(b *testing.B) { benchClean(b, false) }

// BenchmarkCleanTxn is BenchmarkClean with the batches written in
// transactions of four interleaved producers, eight batches each, one
// transaction in four aborted.
func BenchmarkCleanTxn(b *testing.B) { benchClean(b, true) }

func benchClean(b *testing.B, txn bool) {
	records := 100_000
	if v := os.Getenv("WEIR_CLEAN_BENCH_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1_000 {
			b.Fatalf("WEIR_CLEAN_BENCH_RECORDS=%q: want a number of records, at least 1000", v)
		}
		records = n
	}
	keys := records / 10
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	dir := b.TempDir()
	cfg := cleanTestConfig(clk, 1<<20)
	cfg.FS = OSFS{}
	cfg.IndexIntervalBytes = 4096
	src := mustOpen(b, dir, cfg)
	rng := rand.New(rand.NewPCG(1, 1))
	value := bytes.Repeat([]byte("v"), 100)
	recs := make([]kv, 10)
	seqs := map[int64]int32{}
	txns := 0
	for i := range records / 10 {
		for j := range recs {
			recs[j] = kv{fmt.Appendf(nil, "key-%08d", rng.IntN(keys)), value}
		}
		if !txn {
			mustAppend(b, src, keyedBatch(b, CompressionNone, 0, -1, -1, -1, 1, recs))
			continue
		}
		pid := int64(1 + i%4)
		mustAppend(b, src, keyedBatch(b, CompressionNone, attrTransactional, pid, 0, seqs[pid], 1, recs))
		seqs[pid] += int32(len(recs))
		if (i/4)%8 == 7 {
			mustAppend(b, src, BuildMarker(1, pid, 0, txns%4 != 3, 0))
			txns++
		}
	}
	src.SetConfig(Config{SegmentBytes: 1, RetentionMs: -1, RetentionBytes: -1, IndexIntervalBytes: 4096, Now: clk.Now})
	mustAppend(b, src, keyedBatch(b, CompressionNone, 0, -1, -1, -1, 1, []kv{{[]byte("last"), value}}))
	if err := src.Close(); err != nil {
		b.Fatal(err)
	}
	files, err := OSFS{}.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var dirty int64
	for _, f := range files {
		if info, _ := f.Info(); info != nil && len(f.Name()) == 24 && f.Name()[20:] == ".log" {
			dirty += info.Size()
		}
	}
	opts := CleanOptions{DedupeBufferBytes: defaultDedupeBufferBytes}
	b.SetBytes(dirty)
	b.ReportAllocs()
	var peak uint64
	for b.Loop() {
		b.StopTimer()
		work := b.TempDir()
		copyDir(b, dir, work)
		l := mustOpen(b, work, cfg)
		opts.UpTo = l.EndOffset()
		runtime.GC()
		base := heapObjectBytes()
		stop := make(chan struct{})
		sampled := make(chan uint64)
		go func() {
			var top uint64
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					sampled <- top
					return
				case <-tick.C:
					top = max(top, heapObjectBytes())
				}
			}
		}()
		b.StartTimer()
		if _, err := l.Clean(context.Background(), opts); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		close(stop)
		if top := <-sampled; top > base {
			peak = max(peak, top-base)
		}
		l.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(opts.DedupeBufferBytes)/(1<<20), "dedupe-buffer-MiB")
}

// heapObjectBytes is the heap held by live and not yet swept objects.
func heapObjectBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func copyDir(tb testing.TB, from, to string) {
	tb.Helper()
	ents, err := OSFS{}.ReadDir(from)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range ents {
		data, err := readFile(OSFS{}, from+"/"+e.Name())
		if err != nil {
			tb.Fatal(err)
		}
		if err := WriteFileAtomic(nil, to+"/"+e.Name(), data); err != nil {
			tb.Fatal(err)
		}
	}
}
