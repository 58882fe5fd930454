package group

import (
	"fmt"
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

// BenchmarkConsumerHeartbeat is a steady heartbeat of one member of a
// stable KIP-848 group of 500 members over 5,000 partitions: what every
// member costs the coordinator every heartbeat interval.
func BenchmarkConsumerHeartbeat(b *testing.B) {
	cat := &fakeCatalog{}
	cat.set("t", 5000)
	s := consumerSettings()
	c := New(Options{
		Store:           newMemStore(4),
		Settings:        func() Settings { return s },
		PartitionExists: func(string, int32) bool { return true },
		Topics:          cat,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := c.Load(); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	t := &testing.T{}
	members := make([]*consumer, 500)
	for i := range members {
		members[i] = newConsumer(t, c, "bench", fmt.Sprintf("member-%03d", i))
		if r := members[i].join("t"); r.ErrorCode != 0 {
			b.Fatalf("join: %d", r.ErrorCode)
		}
	}
	for round := 0; round < 5; round++ {
		for _, m := range members {
			m.beat()
		}
	}
	if st := describeGroup(t, c, "bench").State; st != "Stable" {
		b.Fatalf("group %s", st)
	}
	m := members[0]
	req := m.request()
	req.Topics = nil // a steady heartbeat reports nothing new
	client := Client{ID: "bench", Host: "/127.0.0.1"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := c.ConsumerGroupHeartbeat(req, client); r.ErrorCode != 0 {
			b.Fatalf("heartbeat: %d", r.ErrorCode)
		}
	}
}
