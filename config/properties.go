package config

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Kind is the type of a cluster property's value.
type Kind uint8

const (
	KindBool Kind = iota
	KindInt
	KindString
)

func (k Kind) String() string {
	switch k {
	case KindBool:
		return "boolean"
	case KindInt:
		return "integer"
	default:
		return "string"
	}
}

// Property describes one cluster property.
type Property struct {
	Name         string
	Kind         Kind
	Default      string
	Description  string
	Enterprise   bool
	NeedsRestart bool
	// Min and Max bound integer properties (inclusive) when Min <= Max.
	Min, Max int64
	// OneOf lists the allowed values of a string property, if restricted.
	OneOf []string
	// Check, when set, validates a string property's value further (a
	// ratio, a list).
	Check func(string) error
}

// Validate checks that value parses as the property's kind and is in range.
func (p *Property) Validate(value string) error {
	switch p.Kind {
	case KindBool:
		if _, err := strconv.ParseBool(value); err != nil {
			return fmt.Errorf("%s: %q is not a boolean", p.Name, value)
		}
	case KindInt:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer", p.Name, value)
		}
		if p.Min <= p.Max && (n < p.Min || n > p.Max) {
			return fmt.Errorf("%s: %d out of range [%d, %d]", p.Name, n, p.Min, p.Max)
		}
	case KindString:
		if len(p.OneOf) > 0 {
			for _, v := range p.OneOf {
				if v == value {
					return nil
				}
			}
			return fmt.Errorf("%s: %q is not one of %v", p.Name, value, p.OneOf)
		}
		if p.Check != nil {
			if err := p.Check(value); err != nil {
				return fmt.Errorf("%s: %q: %w", p.Name, value, err)
			}
		}
	}
	return nil
}

// Registry is the set of known cluster properties.
type Registry struct {
	props map[string]*Property
}

// NewRegistry returns the registry of every cluster property weir uses.
func NewRegistry() *Registry {
	const day = 24 * 60 * 60 * 1000
	r := &Registry{props: map[string]*Property{}}
	for _, p := range []*Property{
		{Name: "auto_create_topics_enabled", Kind: KindBool, Default: "false",
			Description: "Create a topic when a client asks for metadata of, or produces to, one that does not exist."},
		{Name: "default_topic_partitions", Kind: KindInt, Default: "1", Min: 1, Max: 100000,
			Description: "Partitions of a topic created without an explicit count."},
		{Name: "default_topic_replications", Kind: KindInt, Default: "1", Min: 1, Max: 7,
			Description: "Replication factor of a topic created without an explicit one."},
		{Name: "log_retention_ms", Kind: KindInt, Default: strconv.Itoa(7 * day), Min: -1, Max: 1 << 62,
			Description: "Default retention.ms of topics: whole segments older than this are deleted; -1 keeps them forever."},
		{Name: "retention_bytes", Kind: KindInt, Default: "-1", Min: -1, Max: 1 << 62,
			Description: "Default retention.bytes of topics, per partition; -1 is unlimited."},
		{Name: "log_segment_size", Kind: KindInt, Default: strconv.Itoa(1 << 30), Min: 1 << 10, Max: 1 << 40,
			Description: "Default segment.bytes of topics."},
		{Name: "log_segment_ms", Kind: KindInt, Default: strconv.Itoa(7 * day), Min: 60_000, Max: 1 << 62,
			Description: "Default segment.ms of topics: the active segment rolls when it is this old."},
		{Name: "log_cleanup_policy", Kind: KindString, Default: "delete", Check: CheckCleanupPolicy,
			Description: "Default cleanup.policy of topics: delete, compact, or compact,delete (Kafka's log.cleanup.policy)."},
		{Name: "log_cleaner_enabled", Kind: KindBool, Default: "true",
			Description: "Run the log cleaner, which compacts topics whose cleanup.policy includes compact (Kafka's log.cleaner.enable)."},
		{Name: "log_cleaner_threads", Kind: KindInt, Default: "1", Min: 1, Max: 64, NeedsRestart: true,
			Description: "Partitions each broker cleans at once (Kafka's log.cleaner.threads)."},
		{Name: "log_cleaner_dedupe_buffer_size", Kind: KindInt, Default: strconv.Itoa(128 << 20), Min: 1 << 20, Max: 1 << 40,
			Description: "Memory for the key -> offset map of all cleaner threads together; a dirty section with more keys than fit is cleaned in several passes (Kafka's log.cleaner.dedupe.buffer.size)."},
		{Name: "log_cleaner_io_max_bytes_per_second", Kind: KindInt, Default: "0", Min: 0, Max: 1 << 50,
			Description: "Bytes per second each cleaner thread may read and write together; 0: no limit (Kafka's log.cleaner.io.max.bytes.per.second)."},
		{Name: "log_cleaner_backoff_ms", Kind: KindInt, Default: "15000", Min: 10, Max: 1 << 40,
			Description: "How long a cleaner thread sleeps when no partition needs cleaning (Kafka's log.cleaner.backoff.ms)."},
		{Name: "log_cleaner_min_cleanable_ratio", Kind: KindString, Default: "0.5", Check: CheckRatio,
			Description: "Default min.cleanable.dirty.ratio of topics: a partition is cleaned once this share of its cleanable bytes is dirty (Kafka's log.cleaner.min.cleanable.ratio)."},
		{Name: "log_cleaner_min_compaction_lag_ms", Kind: KindInt, Default: "0", Min: 0, Max: 1 << 62,
			Description: "Default min.compaction.lag.ms of topics: records younger than this are never compacted (Kafka's log.cleaner.min.compaction.lag.ms)."},
		{Name: "log_cleaner_max_compaction_lag_ms", Kind: KindInt, Default: "9223372036854775807", Min: 1, Max: 1<<63 - 1,
			Description: "Default max.compaction.lag.ms of topics: a record older than this is compacted whatever the dirty ratio (Kafka's log.cleaner.max.compaction.lag.ms)."},
		{Name: "log_cleaner_delete_retention_ms", Kind: KindInt, Default: strconv.Itoa(day), Min: 0, Max: 1 << 62,
			Description: "Default delete.retention.ms of topics: how long a tombstone is kept after the cleaner first keeps it (Kafka's log.cleaner.delete.retention.ms)."},
		{Name: "kafka_batch_max_bytes", Kind: KindInt, Default: "1048576", Min: 1 << 10, Max: 1 << 30,
			Description: "Default max.message.bytes of topics: the largest record batch a producer may write."},
		{Name: "fetch_max_bytes", Kind: KindInt, Default: "57671680", Min: 1 << 10, Max: 1 << 31,
			Description: "Broker cap on one fetch response (Kafka's fetch.max.bytes)."},
		{Name: "log_message_timestamp_type", Kind: KindString, Default: "CreateTime", OneOf: []string{"CreateTime", "LogAppendTime"},
			Description: "Default message.timestamp.type of topics."},
		{Name: "log_message_timestamp_before_max_ms", Kind: KindInt, Default: "9223372036854775807", Min: 0, Max: 1<<63 - 1,
			Description: "Default message.timestamp.before.max.ms of topics: a CreateTime record older than this, by the leader's clock, is refused with INVALID_TIMESTAMP (Kafka's log.message.timestamp.before.max.ms)."},
		{Name: "log_message_timestamp_after_max_ms", Kind: KindInt, Default: "3600000", Min: 0, Max: 1<<63 - 1,
			Description: "Default message.timestamp.after.max.ms of topics: a CreateTime record more than this ahead of the leader's clock is refused with INVALID_TIMESTAMP (Kafka's log.message.timestamp.after.max.ms)."},
		{Name: "log_compression_type", Kind: KindString, Default: "producer", OneOf: []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"},
			Description: "Default compression.type of topics: producer keeps each batch's codec; another codec re-encodes batches that do not use it (Kafka's compression.type)."},
		{Name: "min_insync_replicas", Kind: KindInt, Default: "1", Min: 1, Max: 1<<15 - 1,
			Description: "Default min.insync.replicas of topics: a produce with acks=all to a partition with fewer live in-sync replicas is refused with NOT_ENOUGH_REPLICAS (Kafka's min.insync.replicas)."},
		{Name: "group_min_session_timeout_ms", Kind: KindInt, Default: "6000", Min: 1, Max: 1 << 31,
			Description: "Shortest session timeout a group member may ask for (Kafka's group.min.session.timeout.ms)."},
		{Name: "group_max_session_timeout_ms", Kind: KindInt, Default: "1800000", Min: 1, Max: 1 << 31,
			Description: "Longest session timeout a group member may ask for (Kafka's group.max.session.timeout.ms)."},
		{Name: "group_initial_rebalance_delay_ms", Kind: KindInt, Default: "3000", Min: 0, Max: 1 << 31,
			Description: "How long the first rebalance of an empty group waits for more members (Kafka's group.initial.rebalance.delay.ms)."},
		{Name: "group_consumer_heartbeat_interval_ms", Kind: KindInt, Default: "5000", Min: 1, Max: 1 << 31,
			Description: "How often members of consumer-protocol (KIP-848) groups heartbeat (Kafka's group.consumer.heartbeat.interval.ms)."},
		{Name: "group_consumer_session_timeout_ms", Kind: KindInt, Default: "45000", Min: 1, Max: 1 << 31,
			Description: "How long a consumer-protocol group member may go without a heartbeat before it is fenced (Kafka's group.consumer.session.timeout.ms)."},
		{Name: "group_consumer_max_size", Kind: KindInt, Default: "2147483647", Min: 1, Max: 1<<31 - 1,
			Description: "Most members a consumer-protocol group may have; more get GROUP_MAX_SIZE_REACHED (Kafka's group.consumer.max.size)."},
		{Name: "group_consumer_assignors", Kind: KindString, Default: "uniform,range", Check: CheckConsumerAssignors,
			Description: "Server assignors of consumer-protocol groups, comma-separated; the first is used when a group's members name none (Kafka's group.consumer.assignors; uniform and range)."},
		{Name: "group_consumer_migration_policy", Kind: KindString, Default: "bidirectional", OneOf: []string{"disabled", "upgrade", "downgrade", "bidirectional"},
			Description: "Whether a running classic group becomes a consumer-protocol group when a consumer-protocol member joins (upgrade), and back when its last one leaves (downgrade) (Kafka's group.consumer.migration.policy)."},
		{Name: "group_offset_retention_sec", Kind: KindInt, Default: strconv.Itoa(7 * 24 * 3600), Min: 1, Max: 1 << 40,
			Description: "How long offsets of an empty group are kept (Kafka's offsets.retention.minutes), counted from when it became empty."},
		{Name: "group_offset_retention_check_ms", Kind: KindInt, Default: "600000", Min: 100, Max: 1 << 40,
			Description: "How often expired group offsets are removed (Kafka's offsets.retention.check.interval.ms)."},
		{Name: "group_topic_compaction_bytes", Kind: KindInt, Default: strconv.Itoa(64 << 20), Min: 1, Max: 1 << 40,
			Description: "No longer used: __consumer_offsets is compacted by the log cleaner (cleanup.policy=compact). Kept so that clusters that set it still load."},
		{Name: "group_topic_partitions", Kind: KindInt, Default: "16", Min: 1, Max: 1000, NeedsRestart: true,
			Description: "Partitions of __consumer_offsets, fixed when the topic is created."},
		{Name: "transaction_state_log_num_partitions", Kind: KindInt, Default: "50", Min: 1, Max: 1000, NeedsRestart: true,
			Description: "Partitions of __transaction_state, fixed when the topic is created at the first transactional request (Kafka's transaction.state.log.num.partitions)."},
		{Name: "transaction_state_log_replication_factor", Kind: KindInt, Default: "3", Min: 1, Max: 7, NeedsRestart: true,
			Description: "Replication factor of __transaction_state, or every live broker when fewer (Kafka's transaction.state.log.replication.factor)."},
		{Name: "transaction_max_timeout_ms", Kind: KindInt, Default: "900000", Min: 1, Max: 1 << 31,
			Description: "Longest transaction.timeout.ms a producer may ask for; longer is INVALID_TRANSACTION_TIMEOUT (Kafka's transaction.max.timeout.ms)."},
		{Name: "transactional_id_expiration_ms", Kind: KindInt, Default: strconv.Itoa(7 * day), Min: 1, Max: 1 << 40,
			Description: "A transactional id whose producer has sent nothing for this long, with no transaction open, is forgotten (Kafka's transactional.id.expiration.ms)."},
		{Name: "transaction_partition_verification_enable", Kind: KindBool, Default: "true",
			Description: "A partition leader asks the transaction coordinator whether a partition is in the producer's ongoing transaction before it accepts the batch that would open one there, so a late or stray batch cannot leave a transaction open for good (KIP-890; Kafka's transaction.partition.verification.enable)."},
		{Name: "transaction_abort_timed_out_transaction_cleanup_interval_ms", Kind: KindInt, Default: "10000", Min: 10, Max: 1 << 31, NeedsRestart: true,
			Description: "How often transactions past their timeout are aborted and expired ids removed (Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms)."},
		{Name: "replica_lag_time_max_ms", Kind: KindInt, Default: "10000", Min: 100, Max: 1 << 31,
			Description: "A follower that has not caught up with its partition leader's log end for this long leaves the in-sync replicas (Kafka's replica.lag.time.max.ms)."},
		{Name: "enable_rack_aware_follower_fetching", Kind: KindBool, Default: "true",
			Description: "Direct a consumer that names its rack (Fetch v11+ rack_id, client.rack) to an in-sync replica in that rack (KIP-392; Kafka's replica.selector.class=RackAwareReplicaSelector). Takes effect only when brokers have racks."},
		{Name: "leader_replication_throttled_rate", Kind: KindInt, Default: "0", Min: 0, Max: 1 << 40,
			Description: "Bytes per second a leader serves to replicas being caught up (a reassignment's new replicas, rebuilt ones) in record copies; 0: no limit (Kafka's leader.replication.throttled.rate, here cluster-wide)."},
		{Name: "follower_replication_throttled_rate", Kind: KindInt, Default: "0", Min: 0, Max: 1 << 40,
			Description: "Bytes per second a replica being caught up copies from its leader; 0: no limit (Kafka's follower.replication.throttled.rate, here cluster-wide)."},
		{Name: "enable_leader_balancer", Kind: KindBool, Default: "true",
			Description: "Move each partition's leadership back to its preferred replica (the first of its replicas) once that replica is in sync again."},
		{Name: "max_incremental_fetch_session_cache_slots", Kind: KindInt, Default: "1000", Min: 0, Max: 1 << 20,
			Description: "Incremental fetch sessions (KIP-227) each broker keeps; a full fetch that finds the cache full and nothing it may evict is answered without a session (Kafka's max.incremental.fetch.session.cache.slots)."},
		{Name: "kafka_fetch_read_coalescing_enabled", Kind: KindBool, Default: "false", Enterprise: true,
			Description: "Serve concurrent fetches of the same partition, offset and settings from one read and one serialised result (enterprise)."},
		{Name: "kafka_enable_authorization", Kind: KindBool, Default: "false",
			Description: "Authorise every Kafka request against the ACLs (Kafka's StandardAuthorizer with allow.everyone.if.no.acl.found=false): a principal may do only what an ACL allows and no ACL denies, unless it is a superuser."},
		{Name: "superusers", Kind: KindString, Default: "",
			Description: "Principals allowed everything, on the Kafka and admin APIs (Kafka's super.users): User:alice, or just alice for a SASL user; separated by commas, or by semicolons as in Kafka (needed for certificate subjects such as User:CN=ops,O=acme)."},
		{Name: "admin_api_require_auth", Kind: KindBool, Default: "false",
			Description: "Require the admin HTTP API's callers to authenticate (HTTP basic auth against the SCRAM users, or a verified client certificate); changes need a superuser."},
		{Name: "disable_metrics", Kind: KindBool, Default: "false", NeedsRestart: true,
			Description: "Do not serve Prometheus metrics."},
	} {
		r.props[p.Name] = p
	}
	return r
}

// Lookup returns the property called name.
func (r *Registry) Lookup(name string) (*Property, bool) {
	p, ok := r.props[name]
	return p, ok
}

// Names lists every property, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.props))
	for n := range r.props {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Values holds the current value of every cluster property. It is safe for
// concurrent use; readers on hot paths take a read lock only.
type Values struct {
	reg *Registry

	mu      sync.RWMutex
	set     map[string]string // explicitly set values; the rest are defaults
	version int64
}

// NewValues starts from the defaults and applies initial, which must name
// known properties with valid values.
func NewValues(reg *Registry, initial map[string]string) (*Values, error) {
	v := &Values{reg: reg, set: map[string]string{}}
	for name, value := range initial {
		if err := v.Set(name, value); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// Registry returns the registry the values are checked against.
func (v *Values) Registry() *Registry { return v.reg }

// Set validates and stores a value, bumping the config version.
func (v *Values) Set(name, value string) error {
	p, ok := v.reg.Lookup(name)
	if !ok {
		return fmt.Errorf("unknown cluster property %q", name)
	}
	if err := p.Validate(value); err != nil {
		return err
	}
	v.mu.Lock()
	v.set[name] = value
	v.version++
	v.mu.Unlock()
	return nil
}

// Get returns a property's value and whether it was set explicitly.
func (v *Values) Get(name string) (value string, explicit bool) {
	v.mu.RLock()
	value, explicit = v.set[name]
	v.mu.RUnlock()
	if !explicit {
		if p, ok := v.reg.Lookup(name); ok {
			value = p.Default
		}
	}
	return value, explicit
}

// Bool returns a boolean property; unknown or malformed values read false.
func (v *Values) Bool(name string) bool {
	s, _ := v.Get(name)
	b, _ := strconv.ParseBool(s)
	return b
}

// Int returns an integer property; unknown or malformed values read 0.
func (v *Values) Int(name string) int64 {
	s, _ := v.Get(name)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// String returns a property's value.
func (v *Values) String(name string) string {
	s, _ := v.Get(name)
	return s
}

// Version counts changes since start.
func (v *Values) Version() int64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.version
}

// Replace makes explicit the whole set of explicitly set values (the rest
// read as defaults), bumping the version if anything changed. Every value
// is validated first; on error nothing changes.
func (v *Values) Replace(explicit map[string]string) error {
	for name, value := range explicit {
		p, ok := v.reg.Lookup(name)
		if !ok {
			return fmt.Errorf("unknown cluster property %q", name)
		}
		if err := p.Validate(value); err != nil {
			return err
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if maps.Equal(v.set, explicit) {
		return nil
	}
	v.set = maps.Clone(explicit)
	v.version++
	return nil
}

// CheckCleanupPolicy accepts Kafka's cleanup.policy values: delete,
// compact, or both, comma-separated in either order.
func CheckCleanupPolicy(v string) error {
	seen := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p != "delete" && p != "compact" {
			return fmt.Errorf("must be a list of delete and compact")
		}
		if seen[p] {
			return fmt.Errorf("lists %s twice", p)
		}
		seen[p] = true
	}
	return nil
}

// CheckRatio accepts a decimal number between 0 and 1.
func CheckRatio(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1 {
		return fmt.Errorf("must be a number between 0 and 1")
	}
	return nil
}

// ConsumerAssignors splits group_consumer_assignors, accepting Kafka's
// class names for the two assignors too.
func ConsumerAssignors(value string) []string {
	var out []string
	for _, name := range strings.Split(value, ",") {
		switch name = strings.TrimSpace(name); name {
		case "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
			name = "uniform"
		case "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
			name = "range"
		}
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

// CheckConsumerAssignors accepts a non-empty list of uniform and range.
func CheckConsumerAssignors(value string) error {
	names := ConsumerAssignors(value)
	if len(names) == 0 {
		return fmt.Errorf("no assignor in %q", value)
	}
	for _, n := range names {
		if n != "uniform" && n != "range" {
			return fmt.Errorf("assignor %q is not one of uniform, range", n)
		}
	}
	return nil
}
