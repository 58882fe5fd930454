package broker

import (
	"errors"
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
