package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
)

func testNode(dir string) config.Node {
	return config.Node{NodeID: 0, DataDir: dir, KafkaAddr: "127.0.0.1:9092", AdvertisedKafkaAddr: "127.0.0.1:9092",
		AdminAddr: "127.0.0.1:9644", RPCAddr: "127.0.0.1:0", LogLevel: "info", MaxRequestBytes: 1 << 20}
}

func openTestBroker(t testing.TB, dir string) *Broker {
	t.Helper()
	b, err := Open(Options{Node: testNode(dir), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func mustCreate(t testing.TB, b *Broker, name string, partitions int32, configs map[string]string) *Topic {
	t.Helper()
	tp, err := b.CreateTopic(CreateTopicRequest{Name: name, Partitions: partitions, Configs: configs})
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// produceBatch appends one batch and returns its base offset.
func produceBatch(t testing.TB, b *Broker, topic string, partition int32, batch logtest.Batch) int64 {
	t.Helper()
	res, err := b.Produce(context.Background(), topic, partition, batch.Encode(), ProduceOptions{AllowZstd: true})
	if err != nil {
		t.Fatalf("produce %s/%d: %v", topic, partition, err)
	}
	return res.BaseOffset
}

func wantCode(t testing.TB, err error, want *kerr.Error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %s", err, want.Message)
	}
}

// forEachLogRecord calls fn with every record of p's log, in order.
func forEachLogRecord(t testing.TB, p *Partition, fn func(log.Record)) {
	t.Helper()
	for off := int64(0); off < p.log.EndOffset(); {
		data, err := p.log.Read(off, 1<<20, log.Obligatory, p.log.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		hs, err := log.ValidateStored(data)
		if err != nil || len(hs) == 0 {
			t.Fatalf("read at %d: %d batches, %v", off, len(hs), err)
		}
		for _, h := range hs {
			if err := log.ForEachRecord(data[:h.Size()], func(r log.Record) bool {
				fn(r)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			data = data[h.Size():]
			off = h.LastOffset() + 1
		}
	}
}
