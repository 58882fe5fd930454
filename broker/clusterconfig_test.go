package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAlterClusterProperties(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "cc", 1, nil)
	v0 := b.ClusterConfigVersion()

	// A bad change anywhere in the batch refuses all of it, naming the
	// property and the reason.
	for _, tc := range []struct {
		ch   PropertyChange
		want string
	}{
		{PropertyChange{Name: "no_such", Value: "1"}, `unknown cluster property "no_such"`},
		{PropertyChange{Name: "log_retention_ms", Value: "x"}, "log_retention_ms: \"x\" is not an integer"},
		{PropertyChange{Name: "default_topic_partitions", Value: "0"}, "default_topic_partitions: 0 out of range"},
		{PropertyChange{Name: "fetch_max_bytes", Value: "4096"}, "changed twice"},
		// Longer than DescribeConfigs v1-v3 can carry.
		{PropertyChange{Name: "superusers", Value: "User:" + strings.Repeat("a", maxPropertyValueBytes)}, "superusers: a value of 32772 bytes is longer than 32767"},
	} {
		err := b.AlterClusterProperties([]PropertyChange{{Name: "fetch_max_bytes", Value: "2048"}, tc.ch}, false)
		wantCode(t, err, kerr.InvalidConfig)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.ch.Name, err, tc.want)
		}
	}
	if _, set := b.Properties().Get("fetch_max_bytes"); set || b.ClusterConfigVersion() != v0 {
		t.Fatal("a refused batch changed something")
	}
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "fetch_max_bytes", Value: "2048"}}, true); err != nil {
		t.Fatal(err)
	}
	if _, set := b.Properties().Get("fetch_max_bytes"); set {
		t.Fatal("validate only changed fetch_max_bytes")
	}

	// One batch, one config version; topics follow the new default.
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "fetch_max_bytes", Value: "2048"}, {Name: "log_retention_ms", Value: "60000"}}, false); err != nil {
		t.Fatal(err)
	}
	if b.ClusterConfigVersion() != v0+1 || b.Properties().Int("fetch_max_bytes") != 2048 {
		t.Fatalf("version %d, fetch_max_bytes %d", b.ClusterConfigVersion(), b.Properties().Int("fetch_max_bytes"))
	}
	for _, e := range b.TopicConfig(tp) {
		if e.Name == "retention.ms" && (e.Value != "60000" || e.Source != SourceClusterDefault) {
			t.Fatalf("retention.ms %+v", e)
		}
	}

	// Remove resets to the default.
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "log_retention_ms", Remove: true}}, false); err != nil {
		t.Fatal(err)
	}
	if v, set := b.Properties().Get("log_retention_ms"); set || v != "604800000" {
		t.Fatalf("log_retention_ms %q %v after remove", v, set)
	}
}
