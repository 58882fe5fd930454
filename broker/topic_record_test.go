package broker

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
)

// recordHarness feeds a topic table the views of a controller state the
// test drives, as reconcile does, without opening replicas: what the
// table's topics read is then only what their record holds.
type recordHarness struct {
	t     *testing.T
	state *controller.State
	index uint64
	nowMs int64
	table TopicTable
}

func newRecordHarness(t *testing.T) *recordHarness {
	props, err := config.NewValues(config.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &recordHarness{t: t, state: controller.New(controller.Options{}), nowMs: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()}
	h.table = newTopicTable(topicTableDeps{
		dataDir: t.TempDir(), props: props, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now,
	})
	return h
}

// ok applies cmd to the controller state and the resulting view to the
// table.
func (h *recordHarness) ok(cmd controller.Command) controller.Result {
	h.t.Helper()
	h.index++
	h.nowMs += 100
	r := h.state.ApplyEntry(h.index, controller.Entry{TimeMs: h.nowMs, Cmd: cmd})
	if r.Err != nil {
		h.t.Fatalf("%T: %v", cmd, r.Err)
	}
	h.table.apply(h.state.View(), false, func(*Topic, *controller.Topic) {}, func(*Partition) {})
	return r
}

// A broker's topic reads the controller's record of it, not a copy taken
// at creation: a reassignment that changes the replication factor and an
// altered config show through the handle the broker already holds, and a
// view that leaves the topic alone keeps its record (and so what the
// produce path cached from it).
func TestTopicReadsTheControllerRecord(t *testing.T) {
	h := newRecordHarness(t)
	h.ok(controller.InitCluster{ClusterID: "c"})
	epochs := map[int32]uint64{}
	for _, node := range []int32{1, 2, 3} {
		epochs[node] = h.ok(controller.RegisterBroker{
			NodeID: node, Incarnation: controller.IncarnationID{byte(node)},
			KafkaAddr: fmt.Sprintf("10.0.0.%d:9092", node), RPCAddr: fmt.Sprintf("10.0.0.%d:33145", node),
		}).BrokerEpoch
	}
	id := controller.NewTopicID()
	h.ok(controller.CreateTopic{Name: "orders", ID: id, Assignment: [][]int32{{1}, {2}}, Configs: map[string]string{"max.message.bytes": "1000"}})

	tp := h.table.Topic("orders")
	if tp == nil || tp.ID() != id || tp.Name() != "orders" {
		t.Fatalf("created: %+v", tp)
	}
	if rf := tp.Record().ReplicationFactor(); rf != 1 {
		t.Fatalf("replication factor %d at creation, want 1", rf)
	}
	if s := h.table.produceSettings(tp); s.maxMessageBytes != 1000 {
		t.Fatalf("max.message.bytes %d at creation, want 1000", s.maxMessageBytes)
	}

	// A replication factor change is a reassignment of every partition.
	for i, target := range [][]int32{{1, 2, 3}, {2, 3, 1}} {
		h.ok(controller.ReassignPartition{Topic: "orders", Partition: int32(i), Target: target})
		h.ok(controller.CompleteReassignment{TopicID: id, Partition: int32(i), Target: target})
	}
	if h.table.Topic("orders") != tp {
		t.Fatal("the reassignment replaced the broker's topic")
	}
	if rf := tp.Record().ReplicationFactor(); rf != 3 {
		t.Fatalf("replication factor %d after the reassignment, want 3", rf)
	}

	h.ok(controller.AlterTopicConfig{TopicRef: controller.TopicRef{Name: "orders", ID: id},
		Ops: []controller.ConfigOp{{Name: "max.message.bytes", Op: controller.ConfigSet, Value: "2000"}}})
	if got := tp.Configs()["max.message.bytes"]; got != "2000" {
		t.Fatalf("max.message.bytes %q after AlterTopicConfig, want 2000", got)
	}
	if got := configValue(h.table.TopicConfig(tp), "max.message.bytes"); got != "2000" {
		t.Fatalf("effective max.message.bytes %q after AlterTopicConfig, want 2000", got)
	}
	settings := h.table.produceSettings(tp)
	if settings.maxMessageBytes != 2000 {
		t.Fatalf("produce path's max.message.bytes %d after AlterTopicConfig, want 2000", settings.maxMessageBytes)
	}

	// A heartbeat makes a new view, not a new record.
	rec := tp.Record()
	h.ok(controller.Heartbeat{NodeID: 1, Epoch: epochs[1]})
	if tp.Record() != rec {
		t.Fatal("a view that left the topic alone replaced its record")
	}
	if h.table.produceSettings(tp) != settings {
		t.Fatal("a view that left the topic alone dropped the produce settings cached from it")
	}
}
