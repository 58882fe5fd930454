// Package group is weir's group coordinator for Kafka's classic group
// protocol: membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
// committed offsets (OffsetCommit, OffsetFetch, OffsetDelete) and group
// administration (ListGroups, DescribeGroups, DeleteGroups).
//
// The coordinator is protocol-agnostic: it picks the protocol every
// member supports and passes the leader's assignment through, so any
// client-side assignor works. It speaks Kafka's request and response
// types (kmsg) because the classic group protocol is its domain.
//
// # Concurrency
//
// Every group is owned by one goroutine (group.run). Requests reach it as
// closures on a channel; JoinGroup and SyncGroup park a reply channel on
// the member and are answered when the rebalance completes. Timers
// (session timeouts, the rebalance deadline, the initial rebalance delay,
// pending members of KIP-394) are one timer per group, reset to the
// earliest deadline after every event. Nothing but the loop touches a
// group's state; ListGroups reads a summary the loop publishes.
//
// Lock order: Coordinator.mu (the group table and the partitions' load
// states) is never held while waiting on a group, replaying a partition
// or appending to the Store. A group's loop takes
// Coordinator.mu (to forget a deleted group), so the reverse would
// deadlock. Groups are stopped only by whoever took them out of the
// table, after releasing it.
//
// # Durability
//
// Offsets and group metadata are records in the internal topic
// __consumer_offsets, in Kafka's own key and value formats (offset commit
// key v1 / value v3, group metadata key v2 / value v3), written through
// the Store before a request is answered. The group of a group id lives in
// partition abs(javaHashCode(id)) % partitions, as in Kafka.
//
// The coordinator serves the groups of the partitions it has loaded, as
// Kafka's does those of the partitions its broker leads: LoadPartition
// replays a partition (the latest record per key wins and a null value
// deletes) and starts its groups; UnloadPartition stops them. A group's
// requests get COORDINATOR_LOAD_IN_PROGRESS while its partition loads and
// NOT_COORDINATOR when it is not loaded. Each partition has a generation,
// bumped by every load start and unload, and a replay takes effect only
// if the generation did not move meanwhile: an unload racing a load wins.
package group
