package broker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
)

// ConfigSource says where a topic config's value comes from, with Kafka's
// DescribeConfigs source codes.
type ConfigSource int8

const (
	SourceTopic          ConfigSource = 1 // TOPIC_CONFIG
	SourceClusterDefault ConfigSource = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
	SourceDefault        ConfigSource = 5 // DEFAULT_CONFIG
)

// topicConfigDef is one topic config Kafka clients may set, defaulting to
// a cluster property.
type topicConfigDef struct {
	name     string
	property string // the cluster property giving the default
	kind     int8   // Kafka's ConfigType: 1 boolean, 2 string, 3 int, 5 long, 6 double, 7 list
	doc      string
	validate func(string) error
	// since is the first controller.ConfigRules accepting the name;
	// rules1, when set, is how rules 1 checked it.
	since  controller.ConfigRules
	rules1 func(string) error
}

// ConfigEntry is one topic config as DescribeConfigs shows it.
type ConfigEntry struct {
	Name      string
	Value     string
	Source    ConfigSource
	ReadOnly  bool
	Sensitive bool
	Doc       string
	Type      int8 // Kafka's ConfigType: 1 boolean, 2 string, 3 int, 5 long, 7 list
	// Synonyms, when set, are the DescribeConfigs synonyms in order of
	// preference (only Name, Value and Source are used).
	Synonyms []ConfigEntry
}

// Kafka's ConfigType codes used by topic configs.
const (
	typeString int8 = 2
	typeInt    int8 = 3
	typeLong   int8 = 5
	typeDouble int8 = 6
	typeList   int8 = 7
)

func topicConfigDefs() []topicConfigDef {
	longAtLeast := func(min int64) func(string) error {
		return func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < min {
				return fmt.Errorf("must be an integer >= %d", min)
			}
			return nil
		}
	}
	oneOf := func(vals ...string) func(string) error {
		return func(v string) error {
			for _, ok := range vals {
				if v == ok {
					return nil
				}
			}
			return fmt.Errorf("must be one of %v", vals)
		}
	}
	return []topicConfigDef{
		{name: "cleanup.policy", property: "log_cleanup_policy", kind: typeList, since: 1, rules1: oneOf("delete"),
			doc: "delete: old segments are removed by retention.ms and retention.bytes; compact: the log cleaner keeps each key's latest record; compact,delete: both.", validate: config.CheckCleanupPolicy},
		{name: "delete.retention.ms", property: "log_cleaner_delete_retention_ms", kind: typeLong, since: 2,
			doc: "How long a tombstone (a record with a key and no value) of a compacted topic is kept after the cleaner first keeps it.", validate: longAtLeast(0)},
		{name: "max.compaction.lag.ms", property: "log_cleaner_max_compaction_lag_ms", kind: typeLong, since: 2,
			doc: "A record older than this is compacted whatever the dirty ratio.", validate: longAtLeast(1)},
		{name: "max.message.bytes", property: "kafka_batch_max_bytes", kind: typeInt, since: 1,
			doc: "Largest record batch size allowed.", validate: longAtLeast(0)},
		{name: "message.timestamp.type", property: "log_message_timestamp_type", kind: typeString, since: 1,
			doc: "CreateTime or LogAppendTime.", validate: oneOf("CreateTime", "LogAppendTime")},
		{name: "min.cleanable.dirty.ratio", property: "log_cleaner_min_cleanable_ratio", kind: typeDouble, since: 2,
			doc: "A compacted partition is cleaned once this share of its cleanable bytes is dirty.", validate: config.CheckRatio},
		{name: "min.compaction.lag.ms", property: "log_cleaner_min_compaction_lag_ms", kind: typeLong, since: 2,
			doc: "Records younger than this are never compacted.", validate: longAtLeast(0)},
		{name: "retention.bytes", property: "retention_bytes", kind: typeLong, since: 1,
			doc: "Per-partition size above which old segments are deleted; -1 unlimited.", validate: longAtLeast(-1)},
		{name: "retention.ms", property: "log_retention_ms", kind: typeLong, since: 1,
			doc: "Age after which old segments are deleted; -1 unlimited.", validate: longAtLeast(-1)},
		{name: "segment.bytes", property: "log_segment_size", kind: typeInt, since: 1,
			doc: "Size of one segment file.", validate: longAtLeast(14)},
		{name: "segment.ms", property: "log_segment_ms", kind: typeLong, since: 1,
			doc: "Age after which the active segment rolls (only closed segments are compacted).", validate: longAtLeast(1)},
	}
}

func lookupTopicConfig(name string) (topicConfigDef, bool) {
	for _, d := range topicConfigDefs() {
		if d.name == name {
			return d, true
		}
	}
	return topicConfigDef{}, false
}

// ValidateTopicConfig checks one topic config under the given rules (the
// controller replays old entries by their own); errors are
// INVALID_CONFIG.
func ValidateTopicConfig(rules controller.ConfigRules, name, value string) error {
	d, ok := lookupTopicConfig(name)
	if !ok || rules < d.since {
		return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, name)
	}
	check := d.validate
	if rules == 1 && d.rules1 != nil {
		check = d.rules1
	}
	if err := check(value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", kerr.InvalidConfig, name, value, err)
	}
	return nil
}

// effectiveConfig resolves every topic config against the cluster
// defaults, sorted by name.
func effectiveConfig(explicit map[string]string, props *config.Values) []ConfigEntry {
	var out []ConfigEntry
	for _, d := range topicConfigDefs() {
		e := ConfigEntry{Name: d.name, Doc: d.doc, Type: d.kind}
		if v := explicit[d.name]; v != "" {
			e.Value, e.Source = v, SourceTopic
		} else {
			v, set := props.Get(d.property)
			e.Value, e.Source = v, SourceDefault
			if set {
				e.Source = SourceClusterDefault
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func configValue(entries []ConfigEntry, name string) string {
	for _, e := range entries {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func configInt(entries []ConfigEntry, name string) int64 {
	n, _ := strconv.ParseInt(configValue(entries, name), 10, 64)
	return n
}

// logConfig turns effective topic configs into the log's settings.
func logConfig(entries []ConfigEntry) log.Config {
	c := log.DefaultConfig()
	c.SegmentBytes = configInt(entries, "segment.bytes")
	c.SegmentMs = configInt(entries, "segment.ms")
	c.RetentionMs = configInt(entries, "retention.ms")
	c.RetentionBytes = configInt(entries, "retention.bytes")
	if policyHas(configValue(entries, "cleanup.policy"), "compact") {
		// A record older than max.compaction.lag.ms must become
		// cleanable, and only closed segments are: the active segment
		// rolls by then (Kafka's LogConfig.maxSegmentMs).
		if lag := configInt(entries, "max.compaction.lag.ms"); lag > 0 {
			c.SegmentMs = min(c.SegmentMs, lag)
		}
	}
	if !policyHas(configValue(entries, "cleanup.policy"), "delete") {
		// compact alone: nothing is deleted by age or size (Kafka's
		// meaning); the cleaner alone shrinks the log.
		c.RetentionMs, c.RetentionBytes = -1, -1
	}
	return c
}

// produceSettings are the effective configs the produce path needs,
// resolved once per change of the topic's configs or of the cluster
// properties rather than on every request.
type produceSettings struct {
	propsVersion    int64
	configs         *map[string]string // the explicit configs they were resolved from
	maxMessageBytes int64
	segmentBytes    int64
	logAppendTime   bool
}

func (tt *TopicTable) produceSettings(t *Topic) *produceSettings {
	configs, version := t.configs.Load(), tt.props.Version()
	if s := t.settings.Load(); s != nil && s.configs == configs && s.propsVersion == version {
		return s
	}
	entries := effectiveConfig(*configs, tt.props)
	s := &produceSettings{
		propsVersion:    version,
		configs:         configs,
		maxMessageBytes: configInt(entries, "max.message.bytes"),
		segmentBytes:    configInt(entries, "segment.bytes"),
		logAppendTime:   configValue(entries, "message.timestamp.type") == "LogAppendTime",
	}
	t.settings.Store(s)
	return s
}

// policyHas reports whether a cleanup.policy list names policy.
func policyHas(list, policy string) bool {
	for _, p := range strings.Split(list, ",") {
		if strings.TrimSpace(p) == policy {
			return true
		}
	}
	return false
}
