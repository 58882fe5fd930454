package group

import (
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// BenchmarkOffsetCommit is one member's commit of 8 partitions through the
// group's loop to an in-memory store: the coordinator's own cost per
// commit, without the log.
func BenchmarkOffsetCommit(b *testing.B) {
	store := newMemStore(4)
	c := New(Options{
		Store:           store,
		Settings:        testSettings,
		PartitionExists: func(string, int32) bool { return true },
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := c.Load(); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.Generation = "bench", -1
	rt := kmsg.OffsetCommitRequestTopic{Topic: "t"}
	for p := int32(0); p < 8; p++ {
		rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, LeaderEpoch: -1})
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for p := range rt.Partitions {
			rt.Partitions[p].Offset = int64(i)
		}
		resp := c.OffsetCommit(req)
		if resp.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatal(resp.Topics[0].Partitions[0].ErrorCode)
		}
		if i%10000 == 0 {
			store.mu.Lock()
			store.parts = make([][]log.KeyValue, len(store.parts))
			store.mu.Unlock()
		}
	}
}
