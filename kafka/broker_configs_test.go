package kafka

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeBroker(t *testing.T, c *rawConn, name string, names ...string) kmsg.DescribeConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms, req.IncludeDocumentation = 4, true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeBroker, name, names
	req.Resources = append(req.Resources, rr)
	resp := c.roundTrip(req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 {
		t.Fatalf("%d resources", len(resp.Resources))
	}
	return resp.Resources[0]
}

func findConfig(r kmsg.DescribeConfigsResponseResource, name string) *kmsg.DescribeConfigsResponseResourceConfig {
	for i := range r.Configs {
		if r.Configs[i].Name == name {
			return &r.Configs[i]
		}
	}
	return nil
}

func incAlterBroker(t *testing.T, c *rawConn, name string, validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version, req.ValidateOnly = 1, validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeBroker, name, ops
	req.Resources = append(req.Resources, rr)
	resp := c.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse)
	return resp.Resources[0]
}

func incOp(name string, op kmsg.IncrementalAlterConfigOp, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = name, op
	if op == kmsg.IncrementalAlterConfigOpSet {
		c.Value = kmsg.StringPtr(value)
	}
	return c
}

func TestBrokerConfigsDescribeAndAlter(t *testing.T) {
	_, b, addr := startServer(t)
	c := dial(t, addr)

	r := describeBroker(t, c, "")
	if r.ErrorCode != 0 {
		t.Fatalf("describe: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A property with a Kafka name is listed under it, the others under
	// weir's.
	ret := findConfig(r, "log.retention.ms")
	if ret == nil || ret.Source != kmsg.ConfigSourceDefaultConfig || ret.ReadOnly || ret.ConfigType != kmsg.ConfigTypeLong ||
		len(ret.ConfigSynonyms) != 1 || ret.Documentation == nil {
		t.Fatalf("log.retention.ms before: %+v", ret)
	}
	if p := findConfig(r, "offsets.topic.num.partitions"); p == nil || !p.ReadOnly {
		t.Fatalf("offsets.topic.num.partitions: %+v", p)
	}
	if findConfig(r, "log_retention_ms") != nil || findConfig(r, "group_topic_partitions") != nil {
		t.Fatal("weir name of a Kafka-named property listed without being asked for")
	}
	if findConfig(r, "superusers") == nil {
		t.Fatal("a weir-only property is not listed under its name")
	}

	// Set through the Kafka name; both names describe it.
	if rr := incAlterBroker(t, c, "", false, incOp("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, "3600000")); rr.ErrorCode != 0 {
		t.Fatalf("set: %v %v", kerr.ErrorForCode(rr.ErrorCode), derefString(rr.ErrorMessage))
	}
	if b.ClusterConfigVersion() != 1 {
		t.Fatalf("config version %d", b.ClusterConfigVersion())
	}
	r = describeBroker(t, c, "0", "log_retention_ms", "log.retention.ms")
	if len(r.Configs) != 2 {
		t.Fatalf("configs %+v", r.Configs)
	}
	for _, cfg := range r.Configs {
		if *cfg.Value != "3600000" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(cfg.ConfigSynonyms) != 2 ||
			cfg.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || cfg.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("after set: %+v", cfg)
		}
	}

	// Refusals name the property and the reason; nothing changes.
	for _, tc := range []struct {
		op   kmsg.IncrementalAlterConfigsRequestResourceConfig
		want string
	}{
		{incOp("no.such.config", kmsg.IncrementalAlterConfigOpSet, "1"), "no.such.config"},
		{incOp("log_retention_ms", kmsg.IncrementalAlterConfigOpSet, "soon"), "not an integer"},
		{incOp("default_topic_partitions", kmsg.IncrementalAlterConfigOpSet, "0"), "out of range"},
		{incOp("auto_create_topics_enabled", kmsg.IncrementalAlterConfigOpAppend, "true"), "list"},
		{incOp("group_topic_partitions", kmsg.IncrementalAlterConfigOpSet, "4"), "read-only"},
	} {
		rr := incAlterBroker(t, c, "", false, incOp("fetch_max_bytes", kmsg.IncrementalAlterConfigOpSet, "2048"), tc.op)
		if rr.ErrorCode != kerr.InvalidConfig.Code || !strings.Contains(derefString(rr.ErrorMessage), tc.want) || !strings.Contains(derefString(rr.ErrorMessage), tc.op.Name) {
			t.Errorf("%s: %v %q", tc.op.Name, kerr.ErrorForCode(rr.ErrorCode), derefString(rr.ErrorMessage))
		}
	}
	if _, set := b.Properties().Get("fetch_max_bytes"); set {
		t.Fatal("a refused batch changed fetch_max_bytes")
	}

	// A specific broker id is refused; validate_only changes nothing.
	if rr := incAlterBroker(t, c, "0", false, incOp("fetch_max_bytes", kmsg.IncrementalAlterConfigOpSet, "2048")); rr.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("broker 0: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	if rr := incAlterBroker(t, c, "", true, incOp("fetch_max_bytes", kmsg.IncrementalAlterConfigOpSet, "2048")); rr.ErrorCode != 0 {
		t.Fatalf("validate only: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	if _, set := b.Properties().Get("fetch_max_bytes"); set {
		t.Fatal("validate_only changed fetch_max_bytes")
	}

	// Replication throttles: deleting them (kafka-reassign-partitions
	// --verify, on each broker) succeeds and changes nothing; setting one
	// is refused with the reason.
	if rr := incAlterBroker(t, c, "0", false, incOp("leader.replication.throttled.rate", kmsg.IncrementalAlterConfigOpDelete, ""),
		incOp("follower.replication.throttled.rate", kmsg.IncrementalAlterConfigOpDelete, "")); rr.ErrorCode != 0 {
		t.Fatalf("deleting the throttles of broker 0: %v %s", kerr.ErrorForCode(rr.ErrorCode), derefString(rr.ErrorMessage))
	}
	// Set on a broker (as kafka-reassign-partitions --throttle does), a
	// rate applies cluster-wide.
	if rr := incAlterBroker(t, c, "0", false, incOp("leader.replication.throttled.rate", kmsg.IncrementalAlterConfigOpSet, "1000")); rr.ErrorCode != 0 {
		t.Fatalf("setting a throttle on broker 0: %v %s", kerr.ErrorForCode(rr.ErrorCode), derefString(rr.ErrorMessage))
	}
	if v, set := b.Properties().Get("leader_replication_throttled_rate"); !set || v != "1000" {
		t.Fatalf("leader_replication_throttled_rate %q %v", v, set)
	}
	if rr := incAlterBroker(t, c, "0", false, incOp("leader.replication.throttled.rate", kmsg.IncrementalAlterConfigOpDelete, "")); rr.ErrorCode != 0 {
		t.Fatalf("deleting the throttle: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	if rr := incAlterBroker(t, c, "0", false, incOp("replica.alter.log.dirs.io.max.bytes.per.second", kmsg.IncrementalAlterConfigOpSet, "1000")); rr.ErrorCode != kerr.InvalidConfig.Code ||
		!strings.Contains(derefString(rr.ErrorMessage), "log directories") {
		t.Fatalf("setting the log-dir throttle: %v %s", kerr.ErrorForCode(rr.ErrorCode), derefString(rr.ErrorMessage))
	}

	// DELETE by the Kafka name of a property set by its weir name.
	if rr := incAlterBroker(t, c, "", false, incOp("default_topic_partitions", kmsg.IncrementalAlterConfigOpSet, "3")); rr.ErrorCode != 0 {
		t.Fatalf("set default_topic_partitions: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	if cfg := findConfig(describeBroker(t, c, ""), "num.partitions"); cfg == nil || *cfg.Value != "3" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("num.partitions after setting default_topic_partitions: %+v", cfg)
	}
	if rr := incAlterBroker(t, c, "", false, incOp("num.partitions", kmsg.IncrementalAlterConfigOpDelete, "")); rr.ErrorCode != 0 {
		t.Fatalf("delete num.partitions: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	if _, set := b.Properties().Get("default_topic_partitions"); set {
		t.Fatal("deleting num.partitions left default_topic_partitions set")
	}

	// AlterConfigs replaces the whole dynamic set.
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Version = 1
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeBroker
	cfg := kmsg.NewAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "fetch_max_bytes", kmsg.StringPtr("4096")
	rr.Configs = append(rr.Configs, cfg)
	req.Resources = append(req.Resources, rr)
	if resp := c.roundTrip(req).(*kmsg.AlterConfigsResponse); resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v", kerr.ErrorForCode(resp.Resources[0].ErrorCode))
	}
	if v, set := b.Properties().Get("fetch_max_bytes"); !set || v != "4096" {
		t.Fatalf("fetch_max_bytes %q %v", v, set)
	}
	if _, set := b.Properties().Get("log_retention_ms"); set {
		t.Fatal("AlterConfigs kept log_retention_ms")
	}

	// DELETE resets to the default.
	if rr := incAlterBroker(t, c, "", false, incOp("fetch_max_bytes", kmsg.IncrementalAlterConfigOpDelete, "")); rr.ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	if p := findConfig(describeBroker(t, c, ""), "fetch.max.bytes"); p == nil || p.Source != kmsg.ConfigSourceDefaultConfig || *p.Value != "57671680" {
		t.Fatalf("after delete: %+v", p)
	}
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
