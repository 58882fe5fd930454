// Package controller is the replicated state machine of the controller
// Raft group: the cluster metadata every broker keeps a read-only copy of.
//
// # What it holds
//
// The cluster id; broker registrations (node id, advertised Kafka address,
// RPC address, rack, incarnation, broker epoch, last heartbeat); topics
// (name, 16-byte id, explicit configs, internal flag) with each
// partition's replicas, leader, leader epoch and the Raft term the leader
// reported in; cluster properties (string values checked against
// config.Registry, each with the config version that set it, and a global
// config version raised once per changing batch); the license (an opaque
// blob and a version); the next free producer id; SCRAM credentials and
// ACLs; client quotas per user, client-id, user+client-id and ip entity
// (quota.go; the snapshot names them only when there are some).
//
// # Layers
//
//   - State is the pure state machine: Apply(index, bytes) in log order,
//     View() for readers, WaitIndex for "at least index N", Subscribe for a
//     callback per applied entry, Check for a dry run (validate-only
//     requests), SnapshotBytes/Restore. It imports nothing of hashicorp.
//   - Machine runs a State as the controller group's raft.StateMachine,
//     as broker.Partition runs a partition's log.
//   - PlaceReplicas is replica placement, a pure function.
//
// # Determinism
//
// Apply reads no clock and no randomness. Time comes from the command
// (the proposer stamps it); the state keeps a logical clock, the largest
// time seen, and judges liveness by it: a broker is live while
// clock - last heartbeat <= Options.BrokerSessionTimeout. Topic ids and
// placement seeds are chosen by the proposer and carried in the command.
// Whatever a map's iteration order could influence (validation order,
// placement, snapshots) goes through sorted keys.
//
// Validators (Options.ValidateTopicConfig and CheckTopicReplication, the
// property registry, Options.ValidateLicense) run inside Apply, so they
// must be pure and the same on every voter. Topic configs are checked under ConfigRules, the
// version of the CreateTopic or AlterTopicConfig entry: a release that
// accepts new names or values raises CurrentConfigRules and keeps the old
// rules for old entries, so a replay refuses what was refused when the
// entry was first applied. Older releases answer an entry of rules they do
// not know with UNSUPPORTED_VERSION, so new configs wait until every
// controller runs the new release. A release that makes a validator refuse
// what an older one accepted would make replays diverge, so it must not.
//
// # Views
//
// A View is immutable and shared: Apply builds the next one copying only
// the parts it changes (copy on write) and publishes it atomically, so
// readers never lock and a View taken before an Apply never changes.
// Accessors return deep copies. Views are what Machine.Snapshot captures, so
// Persist encodes while Apply goes on.
//
// # Command format
//
// One Raft log entry's Data (see commands.go for the drawing):
//
//	0xC7 | type uint8 | version uint8 | time int64 BE (Unix ms) | JSON object
//
// Each command type has its own version, 1 for all today. Decoding is
// strict (unknown fields, trailing data, unknown type or version are
// errors); an entry that does not decode advances the index and changes
// nothing else, answering UNSUPPORTED_VERSION or INVALID_REQUEST, the same
// on every node running the same code. Fields are added only with a new
// version, and old versions stay decodable.
//
// # Snapshot format
//
//	"WEIRCTRL" | version uint16 BE (1) | JSON body | CRC-32C(body) uint32 BE
//
// The body lists brokers by node id, topics by name, properties by name, so
// equal states give byte-identical snapshots.
//
// # Errors
//
// A refused command changes nothing but the index (and the logical clock)
// and answers a Result whose Err wraps a kerr.Error (ErrorCode gives the
// Kafka code): TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION,
// INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
// INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
// INVALID_UPDATE_VERSION (cluster properties' optimistic concurrency),
// DUPLICATE_BROKER_REGISTRATION (*NodeIDConflictError),
// BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH, INVALID_REGISTRATION,
// INCONSISTENT_CLUSTER_ID, FENCED_LEADER_EPOCH (stale leader reports,
// ignored), NOT_LEADER_OR_FOLLOWER (a leader report from a non-replica),
// INVALID_REQUEST.
//
// This package cannot import broker (broker imports raft), so TopicID has
// broker.TopicID's layout.
package controller
