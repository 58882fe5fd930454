package broker

import (
	"errors"
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
// a cluster property or, for those without one, to Kafka's default.
type topicConfigDef struct {
	name     string
	property string // the cluster property giving the default, if any
	fixed    string // the default when there is no property
	kind     int8   // Kafka's ConfigType: 1 boolean, 2 string, 3 int, 5 long, 6 double, 7 list
	doc      string
	validate func(string) error
	// since is the first controller.ConfigRules accepting the name;
	// rules1, when set, is how rules 1 checked it.
	since  controller.ConfigRules
	rules1 func(string) error
	// onlyWhenSet keeps a name Kafka 4 no longer lists out of
	// DescribeConfigs unless the topic sets it.
	onlyWhenSet bool
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
	typeBoolean int8 = 1
	typeString  int8 = 2
	typeInt     int8 = 3
	typeLong    int8 = 5
	typeDouble  int8 = 6
	typeList    int8 = 7
)

// Kafka's defaults of the topic configs weir has no cluster property for.
const (
	maxLong              = "9223372036854775807"
	defaultIndexInterval = "4096"
	defaultIndexBytes    = "10485760"
	defaultDeleteDelayMs = "60000"
	remoteRetentionUnset = "-2" // local.retention.*: the topic's retention.*
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
	// intIn checks Kafka's INT configs, which are 32-bit.
	intIn := func(min, max int64) func(string) error {
		return func(v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < min || n > max {
				return fmt.Errorf("must be an integer in [%d, %d]", min, max)
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
	// boolean accepts true and false as Kafka does (any case); a value
	// weir cannot honour is refused with why.
	boolean := func(refuseTrue string) func(string) error {
		return func(v string) error {
			switch {
			case strings.EqualFold(v, "false"):
				return nil
			case !strings.EqualFold(v, "true"):
				return fmt.Errorf("must be true or false")
			case refuseTrue != "":
				return errors.New(refuseTrue)
			}
			return nil
		}
	}
	const maxInt32 = 1<<31 - 1
	return []topicConfigDef{
		{name: "cleanup.policy", property: "log_cleanup_policy", kind: typeList, since: 1, rules1: oneOf("delete"),
			doc: "delete: old segments are removed by retention.ms and retention.bytes; compact: the log cleaner keeps each key's latest record, and records without a key are refused; compact,delete: both.", validate: config.CheckCleanupPolicy},
		{name: "compression.gzip.level", fixed: strconv.Itoa(log.GzipLevelDefault), kind: typeInt, since: 2,
			doc: "Level of gzip when compression.type=gzip re-encodes a batch: 1-9, or -1 for gzip's default.",
			validate: func(v string) error {
				if v == strconv.Itoa(log.GzipLevelDefault) {
					return nil
				}
				return intIn(log.GzipLevelMin, log.GzipLevelMax)(v)
			}},
		{name: "compression.lz4.level", fixed: strconv.Itoa(log.LZ4LevelDefault), kind: typeInt, since: 2,
			doc: "Level of lz4 when compression.type=lz4 re-encodes a batch: 9 is lz4's fast compressor, as in Kafka; the others its high compression one (above 9 as 9).", validate: intIn(log.LZ4LevelMin, log.LZ4LevelMax)},
		{name: "compression.type", property: "log_compression_type", kind: typeString, since: 2,
			doc: "producer keeps each batch's codec; uncompressed, gzip, snappy, lz4 or zstd re-encodes, when it is appended, a batch that uses another (offsets, sequences and timestamps unchanged).", validate: oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")},
		{name: "compression.zstd.level", fixed: strconv.Itoa(log.ZstdLevelDefault), kind: typeInt, since: 2,
			doc: "Level of zstd when compression.type=zstd re-encodes a batch (the encoder has four speeds: below 3, 3-5, 6-9, 10 and above).", validate: intIn(log.ZstdLevelMin, log.ZstdLevelMax)},
		{name: "delete.retention.ms", property: "log_cleaner_delete_retention_ms", kind: typeLong, since: 2,
			doc: "How long a tombstone (a record with a key and no value) of a compacted topic is kept after the cleaner first keeps it.", validate: longAtLeast(0)},
		{name: "file.delete.delay.ms", fixed: defaultDeleteDelayMs, kind: typeLong, since: 2,
			doc: "Accepted, no effect: weir removes a deleted segment's files as soon as no read is using them.", validate: longAtLeast(0)},
		{name: "flush.messages", fixed: maxLong, kind: typeLong, since: 2,
			doc: "Accepted, no effect: weir fsyncs every write on a majority of the replicas before acknowledging it, as flush.messages=1 would.", validate: longAtLeast(1)},
		{name: "flush.ms", fixed: maxLong, kind: typeLong, since: 2,
			doc: "Accepted, no effect: weir fsyncs every write on a majority of the replicas before acknowledging it, as flush.ms=0 would.", validate: longAtLeast(0)},
		{name: "follower.replication.throttled.replicas", kind: typeList, since: 2,
			doc: "* or partition:broker pairs. Accepted: follower_replication_throttled_rate applies to every replica being caught up, listed or not.", validate: checkThrottledReplicas},
		{name: "index.interval.bytes", fixed: defaultIndexInterval, kind: typeInt, since: 2,
			doc: "Bytes of log between two entries of a segment's offset index; 0 indexes every batch.", validate: intIn(0, maxInt32)},
		{name: "leader.replication.throttled.replicas", kind: typeList, since: 2,
			doc: "* or partition:broker pairs. Accepted: leader_replication_throttled_rate applies to every replica being caught up, listed or not.", validate: checkThrottledReplicas},
		{name: "local.retention.bytes", fixed: remoteRetentionUnset, kind: typeLong, since: 2,
			doc: "Accepted, no effect: it bounds the local part of a tiered (remote.storage.enable) log, and weir keeps every segment on its brokers; -2 means retention.bytes.", validate: longAtLeast(-2)},
		{name: "local.retention.ms", fixed: remoteRetentionUnset, kind: typeLong, since: 2,
			doc: "Accepted, no effect: it bounds the local part of a tiered (remote.storage.enable) log, and weir keeps every segment on its brokers; -2 means retention.ms.", validate: longAtLeast(-2)},
		{name: "max.compaction.lag.ms", property: "log_cleaner_max_compaction_lag_ms", kind: typeLong, since: 2,
			doc: "A record older than this is compacted whatever the dirty ratio.", validate: longAtLeast(1)},
		{name: "max.message.bytes", property: "kafka_batch_max_bytes", kind: typeInt, since: 1,
			doc: "Largest record batch size allowed, as produced and after compression.type re-encodes it.", validate: longAtLeast(0)},
		{name: "message.downconversion.enable", fixed: "true", kind: typeBoolean, since: 2, onlyWhenSet: true,
			doc: "Accepted, no effect (Kafka 4 removed it): weir stores and serves record batches in format v2 only and never converts them.", validate: boolean("")},
		{name: "message.timestamp.after.max.ms", property: "log_message_timestamp_after_max_ms", kind: typeLong, since: 2,
			doc: "With CreateTime, a record whose timestamp is more than this ahead of the leader's clock is refused with INVALID_TIMESTAMP.", validate: longAtLeast(0)},
		{name: "message.timestamp.before.max.ms", property: "log_message_timestamp_before_max_ms", kind: typeLong, since: 2,
			doc: "With CreateTime, a record whose timestamp is more than this behind the leader's clock is refused with INVALID_TIMESTAMP.", validate: longAtLeast(0)},
		{name: "message.timestamp.type", property: "log_message_timestamp_type", kind: typeString, since: 1,
			doc: "CreateTime or LogAppendTime.", validate: oneOf("CreateTime", "LogAppendTime")},
		{name: "min.cleanable.dirty.ratio", property: "log_cleaner_min_cleanable_ratio", kind: typeDouble, since: 2,
			doc: "A compacted partition is cleaned once this share of its cleanable bytes is dirty.", validate: config.CheckRatio},
		{name: "min.compaction.lag.ms", property: "log_cleaner_min_compaction_lag_ms", kind: typeLong, since: 2,
			doc: "Records younger than this are never compacted.", validate: longAtLeast(0)},
		{name: "min.insync.replicas", property: "min_insync_replicas", kind: typeInt, since: 2,
			doc: "A produce with acks=all is refused with NOT_ENOUGH_REPLICAS while fewer replicas are live and in sync; at most the replication factor. Writes are committed by a Raft majority whatever it is.", validate: intIn(1, maxInt32)},
		{name: "preallocate", fixed: "false", kind: typeBoolean, since: 2,
			doc: "false only: weir does not preallocate segment files.", validate: boolean("weir does not preallocate segment files: a segment grows with its appends, each fsynced before it is acknowledged")},
		{name: "remote.log.copy.disable", fixed: "false", kind: typeBoolean, since: 2,
			doc: "Accepted, no effect: weir has no tiered storage, so nothing is copied to remote storage.", validate: boolean("")},
		{name: "remote.log.delete.on.disable", fixed: "false", kind: typeBoolean, since: 2,
			doc: "Accepted, no effect: weir has no tiered storage, so there is no remote data to delete.", validate: boolean("")},
		{name: "remote.storage.enable", fixed: "false", kind: typeBoolean, since: 2,
			doc: "false only: weir has no tiered storage (KIP-405).", validate: boolean("weir has no tiered storage (KIP-405): every segment stays on the brokers' disks")},
		{name: "retention.bytes", property: "retention_bytes", kind: typeLong, since: 1,
			doc: "Per-partition size above which old segments are deleted; -1 unlimited.", validate: longAtLeast(-1)},
		{name: "retention.ms", property: "log_retention_ms", kind: typeLong, since: 1,
			doc: "Age after which old segments are deleted; -1 unlimited.", validate: longAtLeast(-1)},
		{name: "segment.bytes", property: "log_segment_size", kind: typeInt, since: 1,
			doc: "Size of one segment file.", validate: longAtLeast(14)},
		{name: "segment.index.bytes", fixed: defaultIndexBytes, kind: typeInt, since: 2,
			doc: "A segment rolls once its offset index holds segment.index.bytes/8 entries or its time index segment.index.bytes/12, as Kafka's index files of this size do.", validate: intIn(4, maxInt32)},
		{name: "segment.jitter.ms", fixed: "0", kind: typeLong, since: 2,
			doc: "Each segment rolls up to this much (a random amount) before segment.ms, so partitions created together do not roll together.", validate: longAtLeast(0)},
		{name: "segment.ms", property: "log_segment_ms", kind: typeLong, since: 1,
			doc: "Age after which the active segment rolls (only closed segments are compacted).", validate: longAtLeast(1)},
		{name: "unclean.leader.election.enable", fixed: "false", kind: typeBoolean, since: 2,
			doc: "false only: a partition's leader is elected by Raft among the replicas holding every committed record, never from an out-of-date one.", validate: boolean("weir never elects an out-of-date replica: a partition's leader is elected by Raft among the replicas that hold every committed record, so there is no unclean election to enable")},
	}
}

// removedTopicConfig says why a name Kafka 4.0 removed is refused, and
// what to use instead.
func removedTopicConfig(name string) (why string, removed bool) {
	switch name {
	case "message.timestamp.difference.max.ms":
		return "Kafka 4.0 removed it; use message.timestamp.before.max.ms and message.timestamp.after.max.ms", true
	case "message.format.version":
		return "Kafka 4.0 removed it; every batch is stored in record format v2", true
	}
	return "", false
}

// checkThrottledReplicas accepts Kafka's throttled replica lists: "*", or
// partition:broker pairs separated by commas (possibly none).
func checkThrottledReplicas(v string) error {
	if strings.TrimSpace(v) == "*" || strings.TrimSpace(v) == "" {
		return nil
	}
	for _, pair := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(pair), ":")
		_, perr := strconv.ParseUint(strings.TrimSpace(p), 10, 31)
		_, berr := strconv.ParseUint(strings.TrimSpace(b), 10, 31)
		if !ok || perr != nil || berr != nil {
			return fmt.Errorf("want * or partition:broker pairs separated by commas")
		}
	}
	return nil
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
		if why, removed := removedTopicConfig(name); removed {
			return fmt.Errorf("%w: topic config %q: %s", kerr.InvalidConfig, name, why)
		}
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

// CheckTopicReplication refuses a min.insync.replicas above the topic's
// replication factor, which no acks=all produce could satisfy (Kafka
// accepts it and refuses every such produce with NOT_ENOUGH_REPLICAS).
// The controller calls it with the configs a CreateTopic or
// AlterTopicConfig sets, where the replication factor is known; a
// cluster default above a topic's replication factor is not refused, as
// in Kafka, and a reassignment may later lower the factor below the
// topic's value: produce then answers NOT_ENOUGH_REPLICAS.
func CheckTopicReplication(rules controller.ConfigRules, set map[string]string, replicationFactor int) error {
	v, ok := set["min.insync.replicas"]
	if !ok || rules < 2 {
		return nil
	}
	if n, err := strconv.ParseInt(v, 10, 32); err == nil && n > int64(replicationFactor) {
		return fmt.Errorf("%w: min.insync.replicas=%d is above the replication factor %d: no produce with acks=all could succeed", kerr.InvalidConfig, n, replicationFactor)
	}
	return nil
}

// effectiveConfig resolves every topic config against the cluster
// defaults, sorted by name.
func effectiveConfig(explicit map[string]string, props *config.Values) []ConfigEntry {
	var out []ConfigEntry
	for _, d := range topicConfigDefs() {
		e := ConfigEntry{Name: d.name, Doc: d.doc, Type: d.kind}
		switch v, set := explicit[d.name]; {
		case set && (v != "" || d.property == ""):
			e.Value, e.Source = v, SourceTopic
		case d.onlyWhenSet:
			continue
		case d.property == "":
			e.Value, e.Source = d.fixed, SourceDefault
		default:
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
	c.SegmentJitterMs = configInt(entries, "segment.jitter.ms")
	c.SegmentIndexBytes = configInt(entries, "segment.index.bytes")
	// Kafka's 0 indexes every batch; the log reads 0 as its default, and
	// indexes every batch at any interval below a batch's size.
	c.IndexIntervalBytes = int(max(configInt(entries, "index.interval.bytes"), 1))
	if !policyHas(configValue(entries, "cleanup.policy"), "delete") {
		// compact alone: nothing is deleted by age or size (Kafka's
		// meaning); the cleaner alone shrinks the log.
		c.RetentionMs, c.RetentionBytes = -1, -1
	}
	return c
}

// produceSettings are the effective configs the produce path needs,
// resolved once per change of the topic's record (its configs, or its
// partitions' assignment and leaders, which are rarer than requests) or
// of the cluster properties rather than on every request.
type produceSettings struct {
	propsVersion    int64
	rec             *controller.Topic // the record whose explicit configs they were resolved from
	maxMessageBytes int64
	segmentBytes    int64
	logAppendTime   bool
	// compacted: cleanup.policy includes compact, so every record needs
	// a key.
	compacted bool
	// minInsyncReplicas is min.insync.replicas, checked for acks=all.
	minInsyncReplicas int64
	// compression is the codec compression.type re-encodes batches into,
	// keepCodec for producer; compressionLevel is that codec's level.
	compression      int8
	compressionLevel int
	// timestampBeforeMs and timestampAfterMs bound a CreateTime record's
	// distance from the leader's clock (math.MaxInt64: unbounded).
	timestampBeforeMs, timestampAfterMs int64
}

// keepCodec is produceSettings.compression for compression.type=producer.
const keepCodec int8 = -1

// codecOf maps a compression.type value to the codec it re-encodes into
// and the level config that codec reads.
func codecOf(compressionType string) (codec int8, levelConfig string) {
	switch compressionType {
	case "uncompressed":
		return log.CompressionNone, ""
	case "gzip":
		return log.CompressionGzip, "compression.gzip.level"
	case "snappy":
		return log.CompressionSnappy, ""
	case "lz4":
		return log.CompressionLZ4, "compression.lz4.level"
	case "zstd":
		return log.CompressionZstd, "compression.zstd.level"
	}
	return keepCodec, ""
}

func (tt *TopicTable) produceSettings(t *Topic) *produceSettings {
	rec, version := t.Record(), tt.props.Version()
	if s := t.settings.Load(); s != nil && s.rec == rec && s.propsVersion == version {
		return s
	}
	entries := effectiveConfig(rec.Configs, tt.props)
	s := &produceSettings{
		propsVersion:    version,
		rec:             rec,
		maxMessageBytes: configInt(entries, "max.message.bytes"),
		segmentBytes:    configInt(entries, "segment.bytes"),
		logAppendTime:   configValue(entries, "message.timestamp.type") == "LogAppendTime",

		compacted:         policyHas(configValue(entries, "cleanup.policy"), "compact"),
		minInsyncReplicas: configInt(entries, "min.insync.replicas"),
		timestampBeforeMs: configInt(entries, "message.timestamp.before.max.ms"),
		timestampAfterMs:  configInt(entries, "message.timestamp.after.max.ms"),
	}
	var levelConfig string
	s.compression, levelConfig = codecOf(configValue(entries, "compression.type"))
	if levelConfig != "" {
		s.compressionLevel = int(configInt(entries, levelConfig))
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
