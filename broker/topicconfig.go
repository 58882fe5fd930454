package broker

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

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
	doc      string
	validate func(string) error
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
		{"cleanup.policy", "", "delete: old segments are removed by retention.ms and retention.bytes. compact is not supported.", oneOf("delete")},
		{"max.message.bytes", "kafka_batch_max_bytes", "Largest record batch size allowed.", longAtLeast(0)},
		{"message.timestamp.type", "log_message_timestamp_type", "CreateTime or LogAppendTime.", oneOf("CreateTime", "LogAppendTime")},
		{"retention.bytes", "retention_bytes", "Per-partition size above which old segments are deleted; -1 unlimited.", longAtLeast(-1)},
		{"retention.ms", "log_retention_ms", "Age after which old segments are deleted; -1 unlimited.", longAtLeast(-1)},
		{"segment.bytes", "log_segment_size", "Size of one segment file.", longAtLeast(14)},
		{"segment.ms", "log_segment_ms", "Age after which the active segment rolls.", longAtLeast(1)},
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

// ValidateTopicConfig checks one topic config; errors are INVALID_CONFIG.
func ValidateTopicConfig(name, value string) error {
	d, ok := lookupTopicConfig(name)
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, name)
	}
	if err := d.validate(value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", kerr.InvalidConfig, name, value, err)
	}
	return nil
}

// effectiveConfig resolves every topic config against the cluster
// defaults, sorted by name.
func effectiveConfig(explicit map[string]string, props *config.Values) []ConfigEntry {
	var out []ConfigEntry
	for _, d := range topicConfigDefs() {
		e := ConfigEntry{Name: d.name, Doc: d.doc, Type: 5}
		switch {
		case explicit[d.name] != "":
			e.Value, e.Source = explicit[d.name], SourceTopic
		case d.property == "":
			e.Value, e.Source = "delete", SourceDefault
		default:
			v, set := props.Get(d.property)
			e.Value, e.Source = v, SourceDefault
			if set {
				e.Source = SourceClusterDefault
			}
		}
		if d.name == "cleanup.policy" {
			e.Type = 7
		} else if d.name == "message.timestamp.type" {
			e.Type = 2
		} else if d.name == "max.message.bytes" {
			e.Type = 3
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
