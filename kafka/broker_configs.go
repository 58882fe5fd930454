package kafka

// Cluster properties as Kafka BROKER config resources.
//
// weir's cluster properties are cluster-wide: they live in the
// controller's Raft log and every broker follows them without a restart.
// Kafka's closest notion is the cluster-wide dynamic broker default (the
// BROKER resource with an empty name, `kafka-configs --entity-default`,
// kadm's *BrokerConfigs with no brokers), so that is how they are served:
//
//   - DescribeConfigs on BROKER "" or this broker's id lists every
//     property under its weir name with its effective value. Source is
//     DYNAMIC_DEFAULT_BROKER_CONFIG when set in the cluster, DEFAULT_CONFIG
//     otherwise. read_only is true for the properties that only take
//     effect at a restart or at creation (Kafka's meaning: cannot be
//     altered dynamically); they are refused by the alter APIs. Synonyms
//     (v1+) are, as Kafka lists them, the set value
//     (DYNAMIC_DEFAULT_BROKER_CONFIG) then the default (DEFAULT_CONFIG).
//     Documentation (v3+) is the property's description; config type
//     (v3+) is BOOLEAN, LONG for integers, STRING.
//   - Kafka names: a property with a Kafka equivalent (kafkaPropertyNames,
//     e.g. log.retention.ms for log_retention_ms) is described under its
//     Kafka name, so Kafka's tools and the Java AdminClient find what they
//     set (kafka-configs --delete-config refuses a name the describe does
//     not list); weir-only properties under their own names. Either name
//     may be altered or deleted, and config_names may ask for either:
//     asked for by its weir name, a property is described under that name
//     too. Names neither weir nor this table knows are left out of a
//     describe, as Kafka leaves out unknown names.
//   - IncrementalAlterConfigs and AlterConfigs on BROKER "" change the
//     properties through the controller, all of one resource's changes at
//     once or none: SET sets, DELETE resets to the default, APPEND and
//     SUBTRACT are INVALID_CONFIG (no property is a list). AlterConfigs
//     replaces the whole dynamic set, as Kafka's does: properties set in
//     the cluster and not listed are reset (read-only ones are kept).
//     validate_only checks without changing anything.
//   - Refusals: an unknown name, a value of the wrong type or out of range
//     is INVALID_CONFIG with a message naming the property and the reason
//     (Kafka accepts unknown custom broker configs; weir refuses them, as
//     it would store something nothing reads). A read-only property is
//     INVALID_CONFIG too. Altering a specific broker id is
//     INVALID_REQUEST: weir has no per-broker dynamic configs.

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/config"
)

// kafkaPropertyNames maps Kafka broker config names to the weir cluster
// properties that mean the same.
var kafkaPropertyNames = map[string]string{
	"auto.create.topics.enable":                                   "auto_create_topics_enabled",
	"log.retention.ms":                                            "log_retention_ms",
	"log.segment.bytes":                                           "log_segment_size",
	"num.partitions":                                              "default_topic_partitions",
	"default.replication.factor":                                  "default_topic_replications",
	"message.max.bytes":                                           "kafka_batch_max_bytes",
	"fetch.max.bytes":                                             "fetch_max_bytes",
	"log.retention.bytes":                                         "retention_bytes",
	"log.roll.ms":                                                 "log_segment_ms",
	"log.message.timestamp.type":                                  "log_message_timestamp_type",
	"group.min.session.timeout.ms":                                "group_min_session_timeout_ms",
	"group.max.session.timeout.ms":                                "group_max_session_timeout_ms",
	"group.initial.rebalance.delay.ms":                            "group_initial_rebalance_delay_ms",
	"group.consumer.heartbeat.interval.ms":                        "group_consumer_heartbeat_interval_ms",
	"group.consumer.session.timeout.ms":                           "group_consumer_session_timeout_ms",
	"group.consumer.max.size":                                     "group_consumer_max_size",
	"group.consumer.assignors":                                    "group_consumer_assignors",
	"group.consumer.migration.policy":                             "group_consumer_migration_policy",
	"replica.lag.time.max.ms":                                     "replica_lag_time_max_ms",
	"auto.leader.rebalance.enable":                                "enable_leader_balancer",
	"offsets.retention.check.interval.ms":                         "group_offset_retention_check_ms",
	"offsets.topic.num.partitions":                                "group_topic_partitions",
	"leader.replication.throttled.rate":                           "leader_replication_throttled_rate",
	"follower.replication.throttled.rate":                         "follower_replication_throttled_rate",
	"log.cleanup.policy":                                          "log_cleanup_policy",
	"transaction.state.log.num.partitions":                        "transaction_state_log_num_partitions",
	"transaction.state.log.replication.factor":                    "transaction_state_log_replication_factor",
	"transaction.max.timeout.ms":                                  "transaction_max_timeout_ms",
	"transactional.id.expiration.ms":                              "transactional_id_expiration_ms",
	"transaction.partition.verification.enable":                   "transaction_partition_verification_enable",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": "transaction_abort_timed_out_transaction_cleanup_interval_ms",
	"log.cleaner.enable":                                          "log_cleaner_enabled",
	"log.cleaner.threads":                                         "log_cleaner_threads",
	"log.cleaner.dedupe.buffer.size":                              "log_cleaner_dedupe_buffer_size",
	"log.cleaner.io.max.bytes.per.second":                         "log_cleaner_io_max_bytes_per_second",
	"log.cleaner.backoff.ms":                                      "log_cleaner_backoff_ms",
	"log.cleaner.min.cleanable.ratio":                             "log_cleaner_min_cleanable_ratio",
	"log.cleaner.min.compaction.lag.ms":                           "log_cleaner_min_compaction_lag_ms",
	"log.cleaner.max.compaction.lag.ms":                           "log_cleaner_max_compaction_lag_ms",
	"log.cleaner.delete.retention.ms":                             "log_cleaner_delete_retention_ms",
	"log.message.timestamp.before.max.ms":                         "log_message_timestamp_before_max_ms",
	"log.message.timestamp.after.max.ms":                          "log_message_timestamp_after_max_ms",
	"compression.type":                                            "log_compression_type",
	"min.insync.replicas":                                         "min_insync_replicas",
	"max.incremental.fetch.session.cache.slots":                   "max_incremental_fetch_session_cache_slots",
}

// kafkaNameOf is the Kafka name of each weir property that has one.
var kafkaNameOf = func() map[string]string {
	m := make(map[string]string, len(kafkaPropertyNames))
	for k, w := range kafkaPropertyNames {
		m[w] = k
	}
	return m
}()

// propertyName resolves a Kafka or weir name to the weir property name.
func propertyName(name string) string {
	if w, ok := kafkaPropertyNames[name]; ok {
		return w
	}
	return name
}

// checkBrokerResource accepts a BROKER resource name that is the cluster
// default ("") or this broker's id.
func (s *Server) checkBrokerResource(name string) error {
	if name == "" || name == strconv.Itoa(int(s.cluster.NodeID())) {
		return nil
	}
	return fmt.Errorf("%w: broker %q is not this broker (%d)", kerr.InvalidRequest, name, s.cluster.NodeID())
}

// clusterPropertyEntries is every cluster property, under its Kafka name
// when it has one, plus the weir-named entries of those asked for in
// names by their weir name.
func clusterPropertyEntries(v *config.Values, names []string) []broker.ConfigEntry {
	reg := v.Registry()
	var out []broker.ConfigEntry
	for _, name := range reg.Names() {
		shown := name
		if k, ok := kafkaNameOf[name]; ok {
			shown = k
		}
		out = append(out, clusterPropertyEntry(v, shown, name))
	}
	for _, n := range names {
		if _, ok := kafkaNameOf[n]; ok {
			out = append(out, clusterPropertyEntry(v, n, n))
		}
	}
	return out
}

func clusterPropertyEntry(v *config.Values, shown, name string) broker.ConfigEntry {
	p, _ := v.Registry().Lookup(name)
	value, set := v.Get(name)
	e := broker.ConfigEntry{Name: shown, Value: value, Source: broker.SourceDefault, ReadOnly: p.NeedsRestart, Doc: p.Description}
	switch p.Kind {
	case config.KindBool:
		e.Type = 1 // BOOLEAN
	case config.KindInt:
		e.Type = 5 // LONG
	default:
		e.Type = 2 // STRING
	}
	if set {
		e.Source = broker.SourceClusterDefault
		e.Synonyms = append(e.Synonyms, broker.ConfigEntry{Name: shown, Value: value, Source: broker.SourceClusterDefault})
	}
	e.Synonyms = append(e.Synonyms, broker.ConfigEntry{Name: shown, Value: p.Default, Source: broker.SourceDefault})
	return e
}

// alterClusterProperties applies one BROKER resource's ops; replace
// resets every dynamic property not named (AlterConfigs).
func (s *Server) alterClusterProperties(name string, ops []broker.ConfigOp, replace, validateOnly bool) error {
	if name != "" {
		return fmt.Errorf("%w: broker %q: weir's broker configs are cluster-wide; alter the cluster default (the BROKER resource with an empty name, kafka-configs --entity-default)", kerr.InvalidRequest, name)
	}
	props := s.props.Properties()
	reg := props.Registry()
	changes := make([]broker.PropertyChange, 0, len(ops))
	named := map[string]bool{}
	for _, op := range ops {
		w := propertyName(op.Name)
		shown := op.Name
		if w != op.Name {
			shown = fmt.Sprintf("%s (weir's %s)", op.Name, w)
		}
		p, ok := reg.Lookup(w)
		if !ok {
			return fmt.Errorf("%w: unknown broker config %q", kerr.InvalidConfig, op.Name)
		}
		if p.NeedsRestart {
			return fmt.Errorf("%w: %s is read-only: it takes effect only at a restart or at creation; set it in the node config's cluster section", kerr.InvalidConfig, shown)
		}
		named[w] = true
		switch op.Op {
		case 0:
			if err := p.Validate(op.Value); err != nil {
				if w != op.Name {
					return fmt.Errorf("%w: %v (set as Kafka's %s)", kerr.InvalidConfig, err, op.Name)
				}
				return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
			}
			changes = append(changes, broker.PropertyChange{Name: w, Value: op.Value})
		case 1:
			changes = append(changes, broker.PropertyChange{Name: w, Remove: true})
		default:
			return fmt.Errorf("%w: %s: APPEND and SUBTRACT apply to list configs only", kerr.InvalidConfig, shown)
		}
	}
	if replace {
		for _, n := range reg.Names() {
			p, _ := reg.Lookup(n)
			if _, set := props.Get(n); set && !named[n] && !p.NeedsRestart {
				changes = append(changes, broker.PropertyChange{Name: n, Remove: true})
			}
		}
	}
	return s.props.AlterClusterProperties(changes, validateOnly)
}
