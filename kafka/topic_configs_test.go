package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
)

func describeTopic(t *testing.T, c *rawConn, topic string) kmsg.DescribeConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms, req.IncludeDocumentation = 4, true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	resp := c.roundTrip(req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe %s: %+v", topic, resp.Resources)
	}
	return resp.Resources[0]
}

func incAlterTopic(t *testing.T, c *rawConn, topic string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeTopic, topic, ops
	req.Resources = append(req.Resources, rr)
	return c.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
}

// TestProduceRecordErrors: a keyless record on a compacted topic is
// INVALID_RECORD with Kafka's message and, from v8, the record named in
// record_errors; a timestamp out of bounds is INVALID_TIMESTAMP.
func TestProduceRecordErrors(t *testing.T) {
	_, b, addr := startServer(t)
	for name, configs := range map[string]map[string]string{
		"keys":  {"cleanup.policy": "compact"},
		"clock": {"message.timestamp.after.max.ms": "0"},
	} {
		if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: name, Partitions: 1, Configs: configs}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	keyless := log.BuildBatch(now, []log.KeyValue{{Key: []byte("k"), Value: []byte("v")}, {Value: []byte("no key")}})
	future := logtest.Batch{Records: 2, Timestamp: now + time.Hour.Milliseconds()}.Encode()
	c := dial(t, addr)
	for _, v := range []int16{7, 8, 12} {
		sp := c.roundTrip(produceRequest(v, -1, "keys", keyless)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != kerr.InvalidRecord.Code {
			t.Fatalf("v%d keyless: error %d", v, sp.ErrorCode)
		}
		if v < 8 {
			continue
		}
		want := "Compacted topic cannot accept message without key in topic partition keys-0"
		if sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "One or more records have been rejected due to 1 record errors") || !strings.Contains(*sp.ErrorMessage, want) {
			t.Fatalf("v%d keyless: message %v", v, sp.ErrorMessage)
		}
		if len(sp.ErrorRecords) != 1 || sp.ErrorRecords[0].RelativeOffset != 1 || *sp.ErrorRecords[0].ErrorMessage != want {
			t.Fatalf("v%d keyless: record errors %+v", v, sp.ErrorRecords)
		}
		sp = c.roundTrip(produceRequest(v, -1, "clock", future)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != kerr.InvalidTimestamp.Code || len(sp.ErrorRecords) != 2 || !strings.HasPrefix(*sp.ErrorRecords[1].ErrorMessage, "Timestamp ") {
			t.Fatalf("v%d future timestamp: error %d records %+v", v, sp.ErrorCode, sp.ErrorRecords)
		}
	}
}

// TestProduceNotEnoughReplicas: acks=-1 is NOT_ENOUGH_REPLICAS below
// min.insync.replicas; acks=1 is answered.
func TestProduceNotEnoughReplicas(t *testing.T) {
	_, b, addr := startServer(t)
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "isr", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.AlterClusterProperties([]broker.PropertyChange{{Name: "min_insync_replicas", Value: "2"}}, false); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	batch := logtest.Batch{Records: 1, Timestamp: time.Now().UnixMilli()}.Encode()
	sp := c.roundTrip(produceRequest(9, -1, "isr", batch)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotEnoughReplicas.Code || sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "min.insync.replicas=2") {
		t.Fatalf("acks=-1: error %d %v", sp.ErrorCode, sp.ErrorMessage)
	}
	if sp := c.roundTrip(produceRequest(9, 1, "isr", batch)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; sp.ErrorCode != 0 {
		t.Fatalf("acks=1: error %d", sp.ErrorCode)
	}
}

// TestDescribeTopicConfigTypes: every topic config is described with
// Kafka's config type.
func TestDescribeTopicConfigTypes(t *testing.T) {
	_, b, addr := startServer(t)
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "types", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	r := describeTopic(t, dial(t, addr), "types")
	if len(r.Configs) != 33 {
		t.Errorf("%d topic configs described, Kafka 4.1 has 33 (and one internal)", len(r.Configs))
	}
	for name, typ := range map[string]kmsg.ConfigType{
		"cleanup.policy": kmsg.ConfigTypeList, "compression.type": kmsg.ConfigTypeString, "min.insync.replicas": kmsg.ConfigTypeInt,
		"min.cleanable.dirty.ratio": kmsg.ConfigTypeDouble, "retention.ms": kmsg.ConfigTypeLong, "preallocate": kmsg.ConfigTypeBoolean,
		"leader.replication.throttled.replicas": kmsg.ConfigTypeList, "segment.index.bytes": kmsg.ConfigTypeInt,
	} {
		if e := findConfig(r, name); e == nil || e.ConfigType != typ || e.Documentation == nil || e.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("%s: %+v, want type %v", name, e, typ)
		}
	}
}

// TestAlterNewTopicConfigs: IncrementalAlterConfigs sets, appends to and
// deletes the new configs (the throttled replica lists are stored and
// described), and refuses what weir cannot honour with why.
func TestAlterNewTopicConfigs(t *testing.T) {
	_, b, addr := startServer(t)
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "alt", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	if r := incAlterTopic(t, c, "alt",
		incOp("leader.replication.throttled.replicas", kmsg.IncrementalAlterConfigOpSet, "0:0"),
		incOp("compression.type", kmsg.IncrementalAlterConfigOpSet, "zstd"),
		incOp("min.insync.replicas", kmsg.IncrementalAlterConfigOpSet, "1")); r.ErrorCode != 0 {
		t.Fatalf("set: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	appendOp := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	appendOp.Name, appendOp.Op, appendOp.Value = "cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("compact")
	if r := incAlterTopic(t, c, "alt", appendOp); r.ErrorCode != 0 {
		t.Fatalf("append: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	r := describeTopic(t, c, "alt")
	for name, want := range map[string]string{"leader.replication.throttled.replicas": "0:0", "compression.type": "zstd", "min.insync.replicas": "1", "cleanup.policy": "delete,compact"} {
		if e := findConfig(r, name); e == nil || *e.Value != want || e.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s: %+v, want %q set on the topic", name, e, want)
		}
	}
	if r := incAlterTopic(t, c, "alt", incOp("leader.replication.throttled.replicas", kmsg.IncrementalAlterConfigOpDelete, "")); r.ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if e := findConfig(describeTopic(t, c, "alt"), "leader.replication.throttled.replicas"); e == nil || *e.Value != "" || e.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("after delete: %+v", e)
	}
	for op, why := range map[[2]string]string{
		{"unclean.leader.election.enable", "true"}:         "weir never elects an out-of-date replica",
		{"remote.storage.enable", "true"}:                  "no tiered storage",
		{"min.insync.replicas", "2"}:                       "above the replication factor 1",
		{"message.timestamp.difference.max.ms", "1000"}:    "Kafka 4.0 removed it",
		{"leader.replication.throttled.replicas", "0-1,2"}: "partition:broker",
	} {
		r := incAlterTopic(t, c, "alt", incOp(op[0], kmsg.IncrementalAlterConfigOpSet, op[1]))
		if r.ErrorCode != kerr.InvalidConfig.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, why) {
			t.Errorf("%s=%s: error %d %v, want INVALID_CONFIG naming %q", op[0], op[1], r.ErrorCode, r.ErrorMessage, why)
		}
	}
}
