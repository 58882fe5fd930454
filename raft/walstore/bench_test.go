package walstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// BenchmarkStoreLogs compares one shared walstore against a raft-wal per
// group (what raft/store.go opens today, with its 8 MiB segments), each
// fsyncing before StoreLogs returns. One op is one StoreLogs of one 1 KiB
// entry, a lone Apply on a group; groups goroutines, one per group, share
// b.N ops. Run:
//
//	go test -run '^$' -bench BenchmarkStoreLogs -benchtime 2s ./raft/walstore/
func BenchmarkStoreLogs(b *testing.B) {
	const size = 1 << 10
	for _, groups := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("walstore/groups=%d", groups), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			stores := make([]hraft.LogStore, groups)
			for i := range stores {
				stores[i] = s.Group(fmt.Sprintf("topic-%d", i))
			}
			before := s.Stats()
			runStoreLogs(b, stores, size)
			st := s.Stats()
			b.ReportMetric(float64(st.Fsyncs-before.Fsyncs)/float64(b.N), "fsyncs/op")
		})
		b.Run(fmt.Sprintf("raftwal/groups=%d", groups), func(b *testing.B) {
			dir := b.TempDir()
			stores := make([]hraft.LogStore, groups)
			for i := range stores {
				gdir := filepath.Join(dir, fmt.Sprint(i))
				if err := os.MkdirAll(gdir, 0o755); err != nil {
					b.Fatal(err)
				}
				w, err := wal.Open(gdir, wal.WithSegmentSize(8<<20))
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				stores[i] = w
			}
			runStoreLogs(b, stores, size)
			b.ReportMetric(1, "fsyncs/op")
		})
	}
}

func runStoreLogs(b *testing.B, stores []hraft.LogStore, size int) {
	data := make([]byte, size)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for _, st := range stores {
		wg.Go(func() {
			logs := []*hraft.Log{{Type: hraft.LogCommand, Term: 1, Data: data, AppendedAt: time.Now()}}
			for i := uint64(1); next.Add(1) <= int64(b.N); i++ {
				logs[0].Index = i
				if err := st.StoreLogs(logs); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
