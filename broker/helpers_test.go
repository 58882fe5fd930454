package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/config"
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
