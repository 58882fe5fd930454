package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
)

// TestTopicConfigRules: a controller entry is checked by the rules of the
// release that wrote it, so a value refused then is refused on replay.
func TestTopicConfigRules(t *testing.T) {
	for _, tc := range []struct {
		rules       controller.ConfigRules
		name, value string
		ok          bool
	}{
		{1, "cleanup.policy", "delete", true},
		{1, "cleanup.policy", "compact", false},
		{1, "delete.retention.ms", "1000", false},
		{2, "cleanup.policy", "compact", true},
		{2, "cleanup.policy", "compact,delete", true},
		{2, "cleanup.policy", "delete, compact", true},
		{2, "cleanup.policy", "compact,compact", false},
		{2, "cleanup.policy", "", false},
		{2, "min.cleanable.dirty.ratio", "0.1", true},
		{2, "min.cleanable.dirty.ratio", "1.5", false},
		{2, "min.compaction.lag.ms", "-1", false},
		{2, "max.compaction.lag.ms", "0", false},
		{2, "delete.retention.ms", "0", true},
		{2, "no.such.config", "1", false},
	} {
		err := ValidateTopicConfig(tc.rules, tc.name, tc.value)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("rules %d %s=%q: %v", tc.rules, tc.name, tc.value, err)
		}
	}
}

// TestCompactOnlyKeepsEverything: retention.ms and retention.bytes do not
// apply to a topic whose cleanup.policy is compact alone.
func TestCompactOnlyKeepsEverything(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	for policy, deletes := range map[string]bool{"compact": false, "compact,delete": true, "delete": true} {
		cfg := logConfig(effectiveConfig(map[string]string{"cleanup.policy": policy, "retention.ms": "1000"}, b.props))
		if got := cfg.RetentionMs == 1000; got != deletes {
			t.Errorf("cleanup.policy=%s: retention.ms %d", policy, cfg.RetentionMs)
		}
	}
}

// TestKafka41TopicConfigs: every topic config of Kafka 4.1 is accepted
// under rules 2 with its values in Kafka's ranges, refused outside them,
// and refused with why where weir cannot honour a value; none is known
// to rules 1 but the first seven.
func TestKafka41TopicConfigs(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
		why         string // part of the refusal
	}{
		{"compression.type", "zstd", true, ""},
		{"compression.type", "producer", true, ""},
		{"compression.type", "uncompressed", true, ""},
		{"compression.type", "brotli", false, "must be one of"},
		{"compression.gzip.level", "-1", true, ""},
		{"compression.gzip.level", "9", true, ""},
		{"compression.gzip.level", "0", false, "[1, 9]"},
		{"compression.lz4.level", "17", true, ""},
		{"compression.lz4.level", "18", false, "[1, 17]"},
		{"compression.zstd.level", "-131072", true, ""},
		{"compression.zstd.level", "23", false, "[-131072, 22]"},
		{"min.insync.replicas", "2", true, ""},
		{"min.insync.replicas", "0", false, "[1, 2147483647]"},
		{"min.insync.replicas", "2147483648", false, "integer"},
		{"message.timestamp.before.max.ms", "0", true, ""},
		{"message.timestamp.after.max.ms", "9223372036854775807", true, ""},
		{"message.timestamp.after.max.ms", "-1", false, ">= 0"},
		{"message.timestamp.difference.max.ms", "1000", false, "Kafka 4.0 removed it; use message.timestamp.before.max.ms"},
		{"message.format.version", "3.0", false, "Kafka 4.0 removed it"},
		{"message.downconversion.enable", "false", true, ""},
		{"message.downconversion.enable", "TRUE", true, ""},
		{"message.downconversion.enable", "yes", false, "true or false"},
		{"unclean.leader.election.enable", "false", true, ""},
		{"unclean.leader.election.enable", "true", false, "weir never elects an out-of-date replica"},
		{"preallocate", "false", true, ""},
		{"preallocate", "true", false, "does not preallocate"},
		{"remote.storage.enable", "false", true, ""},
		{"remote.storage.enable", "true", false, "no tiered storage"},
		{"remote.log.copy.disable", "true", true, ""},
		{"remote.log.delete.on.disable", "true", true, ""},
		{"local.retention.ms", "-2", true, ""},
		{"local.retention.ms", "-3", false, ">= -2"},
		{"local.retention.bytes", "1024", true, ""},
		{"index.interval.bytes", "0", true, ""},
		{"index.interval.bytes", "-1", false, "[0, 2147483647]"},
		{"segment.index.bytes", "4", true, ""},
		{"segment.index.bytes", "3", false, "[4, 2147483647]"},
		{"segment.jitter.ms", "1000", true, ""},
		{"file.delete.delay.ms", "0", true, ""},
		{"flush.messages", "1", true, ""},
		{"flush.messages", "0", false, ">= 1"},
		{"flush.ms", "0", true, ""},
		{"leader.replication.throttled.replicas", "*", true, ""},
		{"leader.replication.throttled.replicas", "0:1, 1:2", true, ""},
		{"follower.replication.throttled.replicas", "", true, ""},
		{"follower.replication.throttled.replicas", "0-1", false, "partition:broker"},
	} {
		err := ValidateTopicConfig(2, tc.name, tc.value)
		if tc.ok != (err == nil) || err != nil && (!errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), tc.why)) {
			t.Errorf("%s=%q: %v (want ok %v, refusal naming %q)", tc.name, tc.value, err, tc.ok, tc.why)
		}
		if tc.ok && ValidateTopicConfig(1, tc.name, tc.value) == nil {
			t.Errorf("%s=%q is accepted by rules 1", tc.name, tc.value)
		}
	}
}

// TestDescribedTopicConfigs: DescribeConfigs lists the names of Kafka
// 4.1's LogConfig.configNames() but the internal one, with Kafka's types
// and defaults; message.downconversion.enable only when set.
func TestDescribedTopicConfigs(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	want := map[string]struct {
		typ   int8
		value string
	}{
		"cleanup.policy": {typeList, "delete"}, "compression.gzip.level": {typeInt, "-1"}, "compression.lz4.level": {typeInt, "9"},
		"compression.type": {typeString, "producer"}, "compression.zstd.level": {typeInt, "3"}, "delete.retention.ms": {typeLong, "86400000"},
		"file.delete.delay.ms": {typeLong, "60000"}, "flush.messages": {typeLong, "9223372036854775807"}, "flush.ms": {typeLong, "9223372036854775807"},
		"follower.replication.throttled.replicas": {typeList, ""}, "index.interval.bytes": {typeInt, "4096"}, "leader.replication.throttled.replicas": {typeList, ""},
		"local.retention.bytes": {typeLong, "-2"}, "local.retention.ms": {typeLong, "-2"}, "max.compaction.lag.ms": {typeLong, "9223372036854775807"},
		"max.message.bytes": {typeInt, "1048576"}, "message.timestamp.after.max.ms": {typeLong, "3600000"}, "message.timestamp.before.max.ms": {typeLong, "9223372036854775807"},
		"message.timestamp.type": {typeString, "CreateTime"}, "min.cleanable.dirty.ratio": {typeDouble, "0.5"}, "min.compaction.lag.ms": {typeLong, "0"},
		"min.insync.replicas": {typeInt, "1"}, "preallocate": {typeBoolean, "false"}, "remote.log.copy.disable": {typeBoolean, "false"},
		"remote.log.delete.on.disable": {typeBoolean, "false"}, "remote.storage.enable": {typeBoolean, "false"}, "retention.bytes": {typeLong, "-1"},
		"retention.ms": {typeLong, "604800000"}, "segment.bytes": {typeInt, "1073741824"}, "segment.index.bytes": {typeInt, "10485760"},
		"segment.jitter.ms": {typeLong, "0"}, "segment.ms": {typeLong, "604800000"}, "unclean.leader.election.enable": {typeBoolean, "false"},
	}
	entries := effectiveConfig(nil, b.props)
	if len(entries) != len(want) {
		t.Errorf("%d configs described, want %d", len(entries), len(want))
	}
	for _, e := range entries {
		w, ok := want[e.Name]
		if !ok || e.Type != w.typ || e.Value != w.value || e.Source != SourceDefault {
			t.Errorf("%s: type %d value %q source %d, want type %d value %q (known %v)", e.Name, e.Type, e.Value, e.Source, w.typ, w.value, ok)
		}
	}
	entries = effectiveConfig(map[string]string{"message.downconversion.enable": "false", "segment.jitter.ms": "5"}, b.props)
	if v := configValue(entries, "message.downconversion.enable"); v != "false" || configValue(entries, "segment.jitter.ms") != "5" {
		t.Errorf("set configs described as %q and %q", v, configValue(entries, "segment.jitter.ms"))
	}
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "min_insync_replicas", Value: "2"}}, false); err != nil {
		t.Fatal(err)
	}
	for _, e := range effectiveConfig(nil, b.props) {
		if e.Name == "min.insync.replicas" && (e.Value != "2" || e.Source != SourceClusterDefault) {
			t.Errorf("min.insync.replicas from the cluster default: %q source %d", e.Value, e.Source)
		}
	}
}

// TestLogConfigFromTopicConfigs: the log takes index.interval.bytes (0:
// every batch), segment.index.bytes and segment.jitter.ms.
func TestLogConfigFromTopicConfigs(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	cfg := logConfig(effectiveConfig(map[string]string{"index.interval.bytes": "0", "segment.index.bytes": "4096", "segment.jitter.ms": "777"}, b.props))
	if cfg.IndexIntervalBytes != 1 || cfg.SegmentIndexBytes != 4096 || cfg.SegmentJitterMs != 777 {
		t.Fatalf("log config %+v", cfg)
	}
	if cfg := logConfig(effectiveConfig(nil, b.props)); cfg.IndexIntervalBytes != 4096 || cfg.SegmentIndexBytes != 10<<20 || cfg.SegmentJitterMs != 0 {
		t.Fatalf("default log config %+v", cfg)
	}
}

// TestMinInsyncReplicasAboveReplicationFactor: an explicit
// min.insync.replicas above the replication factor is refused at creation
// and alteration, validate-only too; up to it is accepted.
func TestMinInsyncReplicasAboveReplicationFactor(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	for _, validateOnly := range []bool{true, false} {
		_, err := b.CreateTopic(CreateTopicRequest{Name: "misr", Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"min.insync.replicas": "2"}, ValidateOnly: validateOnly})
		wantCode(t, err, kerr.InvalidConfig)
		if !strings.Contains(err.Error(), "min.insync.replicas=2 is above the replication factor 1") {
			t.Fatalf("refusal: %v", err)
		}
	}
	mustCreate(t, b, "misr", 1, map[string]string{"min.insync.replicas": "1"})
	for _, validateOnly := range []bool{true, false} {
		err := b.AlterTopicConfig("misr", []ConfigOp{{Name: "min.insync.replicas", Value: "3"}}, validateOnly)
		wantCode(t, err, kerr.InvalidConfig)
	}
	if err := b.AlterTopicConfig("misr", []ConfigOp{{Name: "retention.ms", Value: "1000"}}, false); err != nil {
		t.Fatal(err)
	}
}

// TestAppendSubtractListConfigs: IncrementalAlterConfigs' APPEND and
// SUBTRACT edit list configs (from their effective value) and are refused
// for the others.
func TestAppendSubtractListConfigs(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "lists", 1, nil)
	steps := []struct {
		op   ConfigOp
		name string
		want string
	}{
		{ConfigOp{Name: "cleanup.policy", Op: 2, Value: "compact"}, "cleanup.policy", "delete,compact"},
		{ConfigOp{Name: "cleanup.policy", Op: 2, Value: "compact"}, "cleanup.policy", "delete,compact"},
		{ConfigOp{Name: "cleanup.policy", Op: 3, Value: "delete"}, "cleanup.policy", "compact"},
		{ConfigOp{Name: "leader.replication.throttled.replicas", Op: 2, Value: "0:1,0:2"}, "leader.replication.throttled.replicas", "0:1,0:2"},
		{ConfigOp{Name: "leader.replication.throttled.replicas", Op: 3, Value: "0:1"}, "leader.replication.throttled.replicas", "0:2"},
	}
	for _, s := range steps {
		if err := b.AlterTopicConfig("lists", []ConfigOp{s.op}, false); err != nil {
			t.Fatalf("%+v: %v", s.op, err)
		}
		if got := b.Topic("lists").Configs()[s.name]; got != s.want {
			t.Fatalf("after %+v: %s=%q, want %q", s.op, s.name, got, s.want)
		}
	}
	// Subtracting the last policy leaves none, which is no policy.
	wantCode(t, b.AlterTopicConfig("lists", []ConfigOp{{Name: "cleanup.policy", Op: 3, Value: "compact"}}, false), kerr.InvalidConfig)
	wantCode(t, b.AlterTopicConfig("lists", []ConfigOp{{Name: "retention.ms", Op: 2, Value: "5"}}, false), kerr.InvalidConfig)
}
