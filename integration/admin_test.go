package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeTopicConfig(t *testing.T, adm *kadm.Client, topic, key string) (kadm.Config, bool) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctxTimeout(t, requestTimeout), topic)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs %s: no result: %v", topic, err)
	}
	if rc.Err != nil {
		t.Fatalf("DescribeTopicConfigs %s: %v (%s)", topic, rc.Err, rc.ErrMessage)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c, true
		}
	}
	return kadm.Config{}, false
}

func TestAdmin(t *testing.T) {
	b := StartBroker(t)
	// kadm answers from kgo's metadata cache for MetadataMinAge (5 s by
	// default); keep it short so every check sees the broker's current state.
	adm := kadm.NewClient(b.Client(t, kgo.MetadataMinAge(10*time.Millisecond)))
	ctx := func() context.Context { return ctxTimeout(t, requestTimeout) }

	const topic = "admin-topic"
	retention := "3600000"
	retBytes := "104857600"

	t.Run("validate only creates nothing", func(t *testing.T) {
		resp, err := adm.ValidateCreateTopics(ctx(), 3, 1, nil, "admin-dry")
		if err != nil {
			t.Fatalf("ValidateCreateTopics: %v", err)
		}
		if r := resp["admin-dry"]; r.Err != nil {
			t.Fatalf("ValidateCreateTopics admin-dry: %v (%s)", r.Err, r.ErrMessage)
		}
		topics, err := adm.ListTopics(ctx())
		if err != nil {
			t.Fatal(err)
		}
		if topics.Has("admin-dry") {
			t.Errorf("validate_only CreateTopics created admin-dry")
		}
		// validate_only still validates.
		resp, err = adm.ValidateCreateTopics(ctx(), 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("not-a-number")}, "admin-dry-bad")
		if err != nil {
			t.Fatalf("ValidateCreateTopics: %v", err)
		}
		if r := resp["admin-dry-bad"]; r.Err == nil {
			t.Errorf("validate_only with retention.ms=not-a-number: no error, want INVALID_CONFIG")
		}
	})

	t.Run("create with configs", func(t *testing.T) {
		resp, err := adm.CreateTopics(ctx(), 3, 1, map[string]*string{"retention.ms": &retention, "retention.bytes": &retBytes}, topic)
		if err != nil {
			t.Fatalf("CreateTopics: %v", err)
		}
		r := resp[topic]
		if r.Err != nil {
			t.Fatalf("CreateTopics %s: %v (%s)", topic, r.Err, r.ErrMessage)
		}
		if r.NumPartitions != 3 {
			t.Errorf("CreateTopics response: %d partitions, want 3", r.NumPartitions)
		}
		if r.ID == (kadm.TopicID{}) {
			t.Errorf("CreateTopics response: zero topic ID")
		}
		waitTopicReady(t, b, topic, 3)
	})

	t.Run("duplicate create", func(t *testing.T) {
		resp, err := adm.CreateTopics(ctx(), 1, 1, nil, topic)
		if err != nil {
			t.Fatalf("CreateTopics: %v", err)
		}
		if r := resp[topic]; !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			t.Errorf("creating %s twice: error %v, want TOPIC_ALREADY_EXISTS (36)", topic, r.Err)
		}
		// The existing topic is untouched.
		waitTopicReady(t, b, topic, 3)
	})

	t.Run("invalid create", func(t *testing.T) {
		resp, err := adm.CreateTopics(ctx(), 0, 1, nil, "admin-zero-partitions")
		if err != nil {
			t.Fatalf("CreateTopics: %v", err)
		}
		if r := resp["admin-zero-partitions"]; !errors.Is(r.Err, kerr.InvalidPartitions) {
			t.Errorf("creating a topic with 0 partitions: error %v, want INVALID_PARTITIONS (37)", r.Err)
		}
		resp, err = adm.CreateTopics(ctx(), 1, 3, nil, "admin-rf3")
		if err != nil {
			t.Fatalf("CreateTopics: %v", err)
		}
		if r := resp["admin-rf3"]; !errors.Is(r.Err, kerr.InvalidReplicationFactor) {
			t.Errorf("creating a topic with replication factor 3 on one broker: error %v, want INVALID_REPLICATION_FACTOR (38)", r.Err)
		}
		resp, err = adm.CreateTopics(ctx(), 1, 1, map[string]*string{"no.such.config": kmsg.StringPtr("1")}, "admin-badcfg")
		if err != nil {
			t.Fatalf("CreateTopics: %v", err)
		}
		if r := resp["admin-badcfg"]; !errors.Is(r.Err, kerr.InvalidConfig) {
			t.Errorf("creating a topic with config no.such.config: error %v, want INVALID_CONFIG (40)", r.Err)
		}
		resp, err = adm.CreateTopics(ctx(), 1, 1, nil, "bad/name")
		if err != nil {
			t.Fatalf("CreateTopics: %v", err)
		}
		if r := resp["bad/name"]; !errors.Is(r.Err, kerr.InvalidTopicException) {
			t.Errorf("creating topic \"bad/name\": error %v, want INVALID_TOPIC_EXCEPTION (17)", r.Err)
		}
	})

	t.Run("list", func(t *testing.T) {
		topics, err := adm.ListTopics(ctx())
		if err != nil {
			t.Fatal(err)
		}
		d, ok := topics[topic]
		if !ok {
			t.Fatalf("ListTopics does not list %s: %v", topic, topics.Names())
		}
		if d.Err != nil || len(d.Partitions) != 3 {
			t.Errorf("ListTopics %s: err %v, %d partitions, want 3", topic, d.Err, len(d.Partitions))
		}
		for _, p := range d.Partitions {
			if p.Leader != int32(b.NodeID) || len(p.Replicas) != 1 || p.Replicas[0] != int32(b.NodeID) {
				t.Errorf("partition %d: leader %d replicas %v, want leader and only replica %d", p.Partition, p.Leader, p.Replicas, b.NodeID)
			}
		}
	})

	t.Run("describe configs", func(t *testing.T) {
		c, ok := describeTopicConfig(t, adm, topic, "retention.ms")
		if !ok {
			t.Fatalf("DescribeConfigs %s: no retention.ms", topic)
		}
		if c.MaybeValue() != retention || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("retention.ms: value %q source %v, want %q DYNAMIC_TOPIC_CONFIG", c.MaybeValue(), c.Source, retention)
		}
		c, ok = describeTopicConfig(t, adm, topic, "retention.bytes")
		if !ok || c.MaybeValue() != retBytes {
			t.Errorf("retention.bytes: %q (present %v), want %q", c.MaybeValue(), ok, retBytes)
		}
		// An unset config reports its default, not as a topic override.
		c, ok = describeTopicConfig(t, adm, topic, "segment.bytes")
		if ok && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("segment.bytes was never set but has source DYNAMIC_TOPIC_CONFIG (value %q)", c.MaybeValue())
		}
		// Only the requested keys.
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = topic
		rr.ConfigNames = []string{"retention.ms", "segment.bytes"}
		req.Resources = append(req.Resources, rr)
		dresp := b.RawRequest(t, req).(*kmsg.DescribeConfigsResponse)
		if len(dresp.Resources) != 1 || dresp.Resources[0].ErrorCode != 0 {
			t.Fatalf("DescribeConfigs with keys: %+v", dresp.Resources)
		}
		var names []string
		for _, c := range dresp.Resources[0].Configs {
			names = append(names, c.Name)
		}
		if len(names) != 2 {
			t.Errorf("DescribeConfigs for [retention.ms segment.bytes] returned %v", names)
		}
		// Unknown topic.
		rcs, err := adm.DescribeTopicConfigs(ctx(), "admin-no-such-topic")
		if err == nil {
			rc, _ := rcs.On("admin-no-such-topic", nil)
			if !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
				t.Errorf("DescribeConfigs of a missing topic: error %v, want UNKNOWN_TOPIC_OR_PARTITION", rc.Err)
			}
		}
	})

	t.Run("incremental alter", func(t *testing.T) {
		newRet := "7200000"
		resp, err := adm.AlterTopicConfigs(ctx(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &newRet}}, topic)
		if err != nil {
			t.Fatalf("AlterTopicConfigs: %v", err)
		}
		if r, err := resp.On(topic, nil); err != nil || r.Err != nil {
			t.Fatalf("AlterTopicConfigs %s: %v %v (%s)", topic, err, r.Err, r.ErrMessage)
		}
		if c, _ := describeTopicConfig(t, adm, topic, "retention.ms"); c.MaybeValue() != newRet {
			t.Errorf("retention.ms after incremental set: %q, want %q", c.MaybeValue(), newRet)
		}
		// Incremental: the other override is untouched.
		if c, _ := describeTopicConfig(t, adm, topic, "retention.bytes"); c.MaybeValue() != retBytes {
			t.Errorf("retention.bytes after altering retention.ms: %q, want %q (incremental alter must not reset other keys)", c.MaybeValue(), retBytes)
		}
		// Delete reverts to the default.
		resp, err = adm.AlterTopicConfigs(ctx(), []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.bytes"}}, topic)
		if err != nil {
			t.Fatalf("AlterTopicConfigs delete: %v", err)
		}
		if r, err := resp.On(topic, nil); err != nil || r.Err != nil {
			t.Fatalf("AlterTopicConfigs delete %s: %v %v", topic, err, r.Err)
		}
		if c, ok := describeTopicConfig(t, adm, topic, "retention.bytes"); ok && (c.Source == kmsg.ConfigSourceDynamicTopicConfig || c.MaybeValue() == retBytes) {
			t.Errorf("retention.bytes after delete: %q source %v, want the default", c.MaybeValue(), c.Source)
		}
		// validate_only does not apply.
		v := "1234"
		if _, err := adm.ValidateAlterTopicConfigs(ctx(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &v}}, topic); err != nil {
			t.Fatalf("ValidateAlterTopicConfigs: %v", err)
		}
		if c, _ := describeTopicConfig(t, adm, topic, "retention.ms"); c.MaybeValue() != newRet {
			t.Errorf("retention.ms after a validate_only alter: %q, want %q", c.MaybeValue(), newRet)
		}
		// An invalid value is rejected.
		bad := "soon"
		resp, err = adm.AlterTopicConfigs(ctx(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &bad}}, topic)
		if err == nil {
			if r, _ := resp.On(topic, nil); r.Err == nil {
				t.Errorf("setting retention.ms=%q succeeded, want INVALID_CONFIG", bad)
			}
		}
		if c, _ := describeTopicConfig(t, adm, topic, "retention.ms"); c.MaybeValue() != newRet {
			t.Errorf("retention.ms after a rejected alter: %q, want %q", c.MaybeValue(), newRet)
		}
	})

	t.Run("create partitions", func(t *testing.T) {
		resp, err := adm.CreatePartitions(ctx(), 2, topic)
		if err != nil {
			t.Fatalf("CreatePartitions: %v", err)
		}
		if r := resp[topic]; r.Err != nil {
			t.Fatalf("CreatePartitions %s: %v (%s)", topic, r.Err, r.ErrMessage)
		}
		waitTopicReady(t, b, topic, 5)
		// The new partition takes writes.
		cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		rec := &kgo.Record{Topic: topic, Partition: 4, Value: []byte("in new partition")}
		if err := cl.ProduceSync(ctxTimeout(t, requestTimeout), rec).FirstErr(); err != nil {
			t.Fatalf("produce to new partition 4: %v", err)
		}
		if rec.Offset != 0 {
			t.Errorf("first record of new partition 4 at offset %d, want 0", rec.Offset)
		}
		// Decreasing is rejected.
		resp, err = adm.UpdatePartitions(ctx(), 2, topic)
		if err != nil {
			t.Fatalf("UpdatePartitions: %v", err)
		}
		if r := resp[topic]; !errors.Is(r.Err, kerr.InvalidPartitions) {
			t.Errorf("shrinking %s to 2 partitions: error %v, want INVALID_PARTITIONS", topic, r.Err)
		}
		waitTopicReady(t, b, topic, 5)
	})

	t.Run("delete records", func(t *testing.T) {
		cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for i := range 100 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "r%03d", i)})
		}
		produceAll(t, cl, recs, 30*time.Second)
		resp, err := adm.DeleteRecords(ctx(), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 40}}})
		if err != nil {
			t.Fatalf("DeleteRecords: %v", err)
		}
		r, ok := resp.Lookup(topic, 0)
		if !ok || r.Err != nil || r.LowWatermark != 40 {
			t.Fatalf("DeleteRecords before offset 40: %+v (present %v), want low watermark 40", r, ok)
		}
		if so := startOffsets(t, adm, topic); so[0] != 40 {
			t.Errorf("ListOffsets earliest after DeleteRecords(40): %d, want 40", so[0])
		}
		if eo := endOffsets(t, adm, topic); eo[0] != 100 {
			t.Errorf("ListOffsets latest after DeleteRecords(40): %d, want 100", eo[0])
		}
		got := consumeN(t, b, 60, 30*time.Second, nil, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if got[0].Offset != 40 || string(got[0].Value) != "r040" {
			t.Errorf("first record from the start after DeleteRecords: offset %d value %q, want 40 \"r040\"", got[0].Offset, got[0].Value)
		}
		// Fetching below the log start offset is out of range.
		rc := dialRaw(t, b.KafkaAddr)
		fr := fetchV(t, rc, 11, fetchSpec{MaxBytes: 1 << 20, Parts: []fetchPart{{Topic: topic, Partition: 0, Offset: 10, MaxBytes: 1 << 20}}})
		if p := onlyPartition(t, fr, topic, 0); p.ErrorCode != errOffsetOutOfRange || p.LogStartOffset != 40 {
			t.Errorf("fetch offset 10 after DeleteRecords(40): error %d log start %d, want %d and 40", p.ErrorCode, p.LogStartOffset, errOffsetOutOfRange)
		}
		// -1 means the high watermark.
		resp, err = adm.DeleteRecords(ctx(), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: -1}}})
		if err != nil {
			t.Fatalf("DeleteRecords(-1): %v", err)
		}
		if r, _ := resp.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 100 {
			t.Errorf("DeleteRecords(-1): %+v, want low watermark 100", r)
		}
		// Beyond the high watermark is out of range.
		resp, err = adm.DeleteRecords(ctx(), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 500}}})
		if err != nil {
			t.Fatalf("DeleteRecords(500): %v", err)
		}
		if r, _ := resp.Lookup(topic, 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
			t.Errorf("DeleteRecords beyond the HWM: %+v, want OFFSET_OUT_OF_RANGE", r)
		}
	})

	t.Run("describe cluster", func(t *testing.T) {
		req := kmsg.NewPtrDescribeClusterRequest()
		resp := b.RawRequest(t, req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("DescribeCluster: error %d", resp.ErrorCode)
		}
		if resp.ClusterID == "" {
			t.Errorf("DescribeCluster: empty cluster ID")
		}
		if len(resp.Brokers) != 1 {
			t.Fatalf("DescribeCluster: %d brokers, want 1", len(resp.Brokers))
		}
		br := resp.Brokers[0]
		host, port, _ := net.SplitHostPort(b.KafkaAddr)
		if br.NodeID != int32(b.NodeID) || br.Host != host || strconv.Itoa(int(br.Port)) != port {
			t.Errorf("DescribeCluster broker %d at %s:%d, want %d at %s", br.NodeID, br.Host, br.Port, b.NodeID, b.KafkaAddr)
		}
		if resp.ControllerID != int32(b.NodeID) {
			t.Errorf("DescribeCluster controller %d, want %d", resp.ControllerID, b.NodeID)
		}
		// Metadata agrees.
		md, err := adm.BrokerMetadata(ctx())
		if err != nil {
			t.Fatal(err)
		}
		if md.Cluster != resp.ClusterID {
			t.Errorf("Metadata cluster ID %q, DescribeCluster %q", md.Cluster, resp.ClusterID)
		}
	})

	t.Run("delete topic", func(t *testing.T) {
		resp, err := adm.DeleteTopics(ctx(), topic)
		if err != nil {
			t.Fatalf("DeleteTopics: %v", err)
		}
		if r := resp[topic]; r.Err != nil {
			t.Fatalf("DeleteTopics %s: %v", topic, r.Err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			topics, err := adm.ListTopics(ctx())
			if err != nil {
				t.Fatal(err)
			}
			if !topics.Has(topic) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still listed 10s after DeleteTopics", topic)
			}
			time.Sleep(100 * time.Millisecond)
		}
		resp, err = adm.DeleteTopics(ctx(), topic)
		if err != nil {
			t.Fatalf("DeleteTopics again: %v", err)
		}
		if r := resp[topic]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("deleting %s twice: %v, want UNKNOWN_TOPIC_OR_PARTITION", topic, r.Err)
		}
		// The name can be reused, starting from offset 0.
		CreateTopic(t, b, topic, 1, nil)
		if eo := endOffsets(t, adm, topic); eo[0] != 0 {
			t.Errorf("recreated %s: end offset %d, want 0", topic, eo[0])
		}
		// And the topic is gone after a restart too (deletion persisted).
		if _, err := adm.DeleteTopics(ctx(), topic); err != nil {
			t.Fatal(err)
		}
		b.Restart(t)
		topics, err := b.Admin(t).ListTopics(ctx())
		if err != nil {
			t.Fatal(err)
		}
		if topics.Has(topic) {
			t.Errorf("%s is back after a restart", topic)
		}
	})
}
