package config

import (
	"strings"
	"testing"
)

func TestLoadNodePrecedence(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/weir.yaml"
	yaml := "node_id: 3\ndata_dir: /var/lib/weir\nkafka_addr: 127.0.0.1:1000\ncluster:\n  auto_create_topics_enabled: true\n"
	if err := writeFile(path, yaml); err != nil {
		t.Fatal(err)
	}
	environ := func() []string {
		return []string{"WEIR_KAFKA_ADDR=127.0.0.1:2000", "WEIR_ADMIN_ADDR=127.0.0.1:3000", "HOME=/root"}
	}
	n, err := LoadNode([]string{"--config", path, "--admin-addr", "127.0.0.1:4000", "--set", "cluster.default_topic_partitions=6", "--seeds", "127.0.0.1:33146, 127.0.0.1:33147"}, environ)
	if err != nil {
		t.Fatal(err)
	}
	if n.NodeID != 3 || n.DataDir != "/var/lib/weir" {
		t.Errorf("file values lost: %+v", n)
	}
	if n.KafkaAddr != "127.0.0.1:2000" {
		t.Errorf("env should override file: kafka_addr=%s", n.KafkaAddr)
	}
	if n.AdminAddr != "127.0.0.1:4000" {
		t.Errorf("flag should override env: admin_addr=%s", n.AdminAddr)
	}
	if len(n.Seeds) != 2 || n.Seeds[1] != "127.0.0.1:33147" {
		t.Errorf("seeds: %q", n.Seeds)
	}
	if n.AdvertisedKafkaAddr != n.KafkaAddr {
		t.Errorf("advertised address defaults to the listener: %s", n.AdvertisedKafkaAddr)
	}
	if n.Cluster["auto_create_topics_enabled"] != "true" || n.Cluster["default_topic_partitions"] != "6" {
		t.Errorf("cluster properties: %v", n.Cluster)
	}
}

func TestLoadNodeDefaults(t *testing.T) {
	n, err := LoadNode(nil, func() []string { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if n.KafkaAddr != "127.0.0.1:9092" || n.DataDir != "./data" || n.AdminAddr != "127.0.0.1:9644" || n.MaxRequestBytes != 100<<20 {
		t.Errorf("defaults: %+v", n)
	}
}

func TestLoadNodeRejectsInvalid(t *testing.T) {
	for _, args := range [][]string{
		{"--kafka-addr", "nonsense"},
		{"--kafka-addr", "0.0.0.0:9092"},
		{"--log-level", "loud"},
		{"--set", "max_request_bytes=10"},
		{"--set", "novalue"},
		{"--config", "/does/not/exist.yaml"},
	} {
		if _, err := LoadNode(args, func() []string { return nil }); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

func TestValuesValidate(t *testing.T) {
	v, err := NewValues(NewRegistry(), map[string]string{"auto_create_topics_enabled": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Bool("auto_create_topics_enabled") {
		t.Error("initial value not applied")
	}
	if got := v.Int("default_topic_partitions"); got != 1 {
		t.Errorf("default partitions = %d", got)
	}
	for name, bad := range map[string]string{
		"auto_create_topics_enabled": "maybe",
		"default_topic_partitions":   "0",
		"log_message_timestamp_type": "WallClock",
		"no_such_property":           "1",
	} {
		if err := v.Set(name, bad); err == nil {
			t.Errorf("%s=%s accepted", name, bad)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name the property: %v", err)
		}
	}
	before := v.Version()
	if err := v.Set("default_topic_partitions", "3"); err != nil || v.Int("default_topic_partitions") != 3 || v.Version() != before+1 {
		t.Errorf("set: err=%v value=%d version=%d", err, v.Int("default_topic_partitions"), v.Version())
	}
}
