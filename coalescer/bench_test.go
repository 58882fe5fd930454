package coalescer

import (
	"context"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkReadyHit is the hot path: a back-to-back fetch served from a
// retained result that another consumer still holds. It must not allocate.
func BenchmarkReadyHit(b *testing.B) {
	c, err := New(Options{Enabled: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	read := func(context.Context) ([]byte, int64, error) { return make([]byte, 1024), 10, nil }
	holder, err := c.Read(ctx, baseKey(), 10, read)
	if err != nil {
		b.Fatal(err)
	}
	defer holder.Release()

	b.ReportAllocs()
	for b.Loop() {
		res, err := c.Read(ctx, baseKey(), 10, read)
		if err != nil || res != holder {
			b.Fatal("not a ready hit")
		}
		res.Release()
	}
	if s := SumStats(c.Stats()); s.Insertions != 1 {
		b.Fatalf("stats %+v", s)
	}
}

// BenchmarkReadyHitParallel shows the shard mutex under contention: every
// goroutine hits the same key, so the same shard.
func BenchmarkReadyHitParallel(b *testing.B) {
	c, err := New(Options{Enabled: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	read := func(context.Context) ([]byte, int64, error) { return make([]byte, 1024), 10, nil }
	holder, err := c.Read(ctx, baseKey(), 10, read)
	if err != nil {
		b.Fatal(err)
	}
	defer holder.Release()

	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := c.Read(ctx, baseKey(), 10, read)
			if err != nil {
				b.Error(err)
				return
			}
			res.Release()
		}
	})
}

// serialize reads from segment, which stands in for a partition's log: it
// copies a fetch's worth into a fresh buffer and checksums it, the work
// coalescing saves.
func serialize(segment []byte, reads *atomic.Int64, offset int64) ReadFunc {
	return func(context.Context) ([]byte, int64, error) {
		reads.Add(1)
		out := make([]byte, 64<<10)
		copy(out, segment[offset%4:])
		_ = crc32.ChecksumIEEE(out)
		return out, offset, nil
	}
}

// BenchmarkFanout: each round, 64 consumers fetch the same new offset at
// once; one op is one round. Coalesced, they share about one read;
// direct, each reads and serializes its own copy.
func BenchmarkFanout(b *testing.B) {
	const consumers = 64
	for _, mode := range []struct {
		name    string
		enabled bool
	}{{"coalesced", true}, {"direct", false}} {
		b.Run(mode.name, func(b *testing.B) {
			c, err := New(Options{Enabled: mode.enabled})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var reads atomic.Int64
			segment := make([]byte, 256<<10)
			b.ReportAllocs()
			var offset int64
			for b.Loop() {
				offset++
				key := baseKey()
				key.Offset = offset
				read := serialize(segment, &reads, offset)
				var wg sync.WaitGroup
				start := make(chan struct{})
				results := make([]*Result, consumers)
				for i := range consumers {
					wg.Go(func() {
						<-start
						res, err := c.Read(context.Background(), key, offset, read)
						if err != nil {
							b.Error(err)
							return
						}
						results[i] = res
					})
				}
				close(start)
				wg.Wait()
				for _, res := range results {
					if res != nil {
						res.Release()
					}
				}
			}
			b.ReportMetric(float64(reads.Load())/float64(b.N), "reads/op")
			b.ReportMetric(HitRatio(SumStats(c.Stats())), "hit-ratio")
		})
	}
}

// BenchmarkDistinctKeys is the worst case for coalescing: no two fetches
// share, so every read pays the index and the hop to a worker.
func BenchmarkDistinctKeys(b *testing.B) {
	for _, mode := range []struct {
		name    string
		enabled bool
	}{{"coalesced", true}, {"direct", false}} {
		b.Run(mode.name, func(b *testing.B) {
			c, err := New(Options{Enabled: mode.enabled})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var next atomic.Int64
			read := func(context.Context) ([]byte, int64, error) { return make([]byte, 512), 0, nil }
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					n := next.Add(1)
					key := baseKey()
					key.Partition = int32(n % 64)
					key.Offset = n
					res, err := c.Read(ctx, key, 0, read)
					if err != nil {
						b.Error(err)
						return
					}
					res.Release()
				}
			})
		})
	}
}
