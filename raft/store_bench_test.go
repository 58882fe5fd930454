package raft

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"

	"github.com/weir-broker/weir/raft/walstore"
)

// BenchmarkLogStore compares durable log stores for one group, each
// fsyncing before StoreLogs returns, as Raft requires: the node's shared
// log (walstore, what weir uses) and the per-group stores it replaced
// (raft-wal) or could have used (raft-boltdb). Many groups writing at once
// is walstore's own benchmark (group commit). One op is one
// StoreLogs call: batch=1 is a lone Apply on an idle group, batch=64 is
// what the leader group-commits under load (MaxAppendEntries' default).
// Run side by side:
//
//	go test -run '^$' -bench BenchmarkLogStore -benchtime 2s ./raft/
func BenchmarkLogStore(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B, dir string) hraft.LogStore
	}{
		{"shared", func(b *testing.B, dir string) hraft.LogStore {
			s, err := walstore.Open(dir, walstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s.Group("bench")
		}},
		{"wal", func(b *testing.B, dir string) hraft.LogStore {
			w, err := wal.Open(dir, wal.WithSegmentSize(8<<20))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { w.Close() })
			return w
		}},
		{"bolt", func(b *testing.B, dir string) hraft.LogStore {
			s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	}
	for _, size := range []int{1 << 10, 16 << 10} {
		for _, batch := range []int{1, 64} {
			for _, st := range stores {
				name := fmt.Sprintf("%s/entry=%dKiB/batch=%d", st.name, size>>10, batch)
				b.Run(name, func(b *testing.B) {
					s := st.open(b, b.TempDir())
					data := make([]byte, size)
					logs := make([]*hraft.Log, batch)
					for i := range logs {
						logs[i] = &hraft.Log{Type: hraft.LogCommand, Term: 1, Data: data, AppendedAt: time.Now()}
					}
					b.ReportAllocs()
					b.SetBytes(int64(size * batch))
					b.ResetTimer()
					next := uint64(1)
					for b.Loop() {
						for _, l := range logs {
							l.Index = next
							next++
						}
						if err := s.StoreLogs(logs); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "entries/s")
				})
			}
		}
	}
}
