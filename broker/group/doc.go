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
// Lock order: Coordinator.mu (the group table) is never held while
// waiting on a group.
//
// # Durability
//
// Offsets and group metadata are records in the internal topic
// __consumer_offsets, in Kafka's own key and value formats (offset commit
// key v1 / value v3, group metadata key v2 / value v3), written through
// the Store before a request is answered. The group of a group id lives in
// partition abs(javaHashCode(id)) % partitions, as in Kafka. On start the
// coordinator replays every partition: the latest record per key wins and
// a null value deletes.
package group
