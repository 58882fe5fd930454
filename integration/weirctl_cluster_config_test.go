package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWeirctlClusterConfig: weirctl cluster config against the admin
// HTTP API of a 3-broker cluster — a set through one broker is seen
// through the others, a bad set names every bad property and changes
// nothing, export/import round-trips, status lists every broker, and the
// imported values are kept and in effect after a full restart.
func TestWeirctlClusterConfig(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 3)
	w := newWeirctl(t, bs[0])
	url := func(b *Broker) string { return "http://" + b.AdminAddr }
	cc := func(b *Broker, args ...string) []string {
		return append([]string{"cluster", "config", "--admin-url", url(b)}, args...)
	}
	getSet := func(b *Broker) map[string]any {
		return decodeJSON[map[string]any](t, w.ok(t, "", cc(b, "get", "--format", "json")...))
	}

	// Every broker lists every broker's admin address (GET /v1/brokers),
	// which is how tools reach each broker's API and metrics.
	var brokers []struct {
		NodeID    int32  `json:"node_id"`
		AdminAddr string `json:"admin_addr"`
		IsAlive   bool   `json:"is_alive"`
	}
	if code, raw := adminDo(t, bs[2], "GET", "/v1/brokers", "", &brokers); code != 200 || len(brokers) != 3 {
		t.Fatalf("GET /v1/brokers: %d %s", code, raw)
	}
	for i, b := range brokers {
		if b.NodeID != int32(i) || b.AdminAddr != bs[i].AdminAddr || !b.IsAlive {
			t.Fatalf("GET /v1/brokers: %+v", brokers)
		}
	}

	w.ok(t, "", cc(bs[1], "set", "log_retention_ms=123456789")...)
	for _, b := range []*Broker{bs[0], bs[2]} {
		pollUntil(t, configPropagation, fmt.Sprintf("node %d shows log_retention_ms", b.NodeID), func() error {
			got := decodeJSON[map[string]any](t, w.ok(t, "", cc(b, "get", "log_retention_ms", "--format", "json")...))
			if got["log_retention_ms"] != float64(123456789) || len(got) != 1 {
				return fmt.Errorf("got %v", got)
			}
			return nil
		})
	}
	if out := w.ok(t, "", cc(bs[2], "get", "log_retention_ms")...).stdout; !strings.Contains(out, "log_retention_ms") || !strings.Contains(out, "123456789") {
		t.Fatalf("table output: %s", out)
	}

	before := getSet(bs[1])
	r := w.fails(t, "no_such_property", cc(bs[1], "set", "no_such_property=1", "default_topic_replications=99", "log_segment_ms=600000")...)
	if !strings.Contains(r.stderr, "default_topic_replications") || !strings.Contains(r.stderr, "out of range") {
		t.Fatalf("bad set must name both properties:\n%s", r)
	}
	if after := getSet(bs[1]); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused set changed properties:\n%v\n%v", before, after)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	w.ok(t, "", cc(bs[0], "export", "-f", file)...)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(data)) != "log_retention_ms: 123456789" {
		t.Fatalf("export:\n%s", data)
	}
	if all := w.ok(t, "", cc(bs[0], "export", "--all")...).stdout; !strings.Contains(all, "group_topic_partitions: 16") {
		t.Fatalf("export --all:\n%s", all)
	}
	// Edit: drop log_retention_ms (import resets it), add two others.
	if err := os.WriteFile(file, []byte("retention_bytes: 1048576\nauto_create_topics_enabled: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.ok(t, "", cc(bs[2], "import", "-f", file)...)
	want := "auto_create_topics_enabled: true\nretention_bytes: 1048576\n"
	for _, b := range bs {
		pollUntil(t, configPropagation, fmt.Sprintf("node %d exports the imported file", b.NodeID), func() error {
			if got := w.ok(t, "", cc(b, "export")...).stdout; got != want {
				return fmt.Errorf("export:\n%s", got)
			}
			return nil
		})
	}

	type status struct {
		NodeID        int32  `json:"node_id"`
		ConfigVersion int64  `json:"config_version"`
		Restart       bool   `json:"restart"`
		Error         string `json:"error"`
	}
	pollUntil(t, configPropagation, "status lists 3 brokers at one config version", func() error {
		st := decodeJSON[[]status](t, w.ok(t, "", cc(bs[0], "status", "--format", "json")...))
		if len(st) != 3 {
			return fmt.Errorf("%d entries: %+v", len(st), st)
		}
		for i, s := range st {
			if s.NodeID != int32(i) || s.ConfigVersion != st[0].ConfigVersion || s.ConfigVersion < 2 || s.Restart || s.Error != "" {
				return fmt.Errorf("%+v", st)
			}
		}
		return nil
	})
	if out := w.ok(t, "", cc(bs[0], "status")...).stdout; strings.Count(out, "\n") != 4 {
		t.Fatalf("status table:\n%s", out)
	}

	// A full restart keeps them, and they are in effect: auto-creation is
	// on, and the topic it creates takes retention.bytes from the cluster
	// default.
	restartAll(t, bs)
	for _, b := range bs {
		if got := w.ok(t, "", cc(b, "export")...).stdout; got != want {
			t.Fatalf("node %d after restart exports:\n%s", b.NodeID, got)
		}
	}
	const topic = "weirctl-config-autocreated"
	cl := bs[2].Client(t, kgo.AllowAutoTopicCreation())
	produceAll(t, cl, []*kgo.Record{{Topic: topic, Value: []byte("x")}}, clusterTimeout)
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeTopic, topic, "retention.bytes", "1048576", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
}
