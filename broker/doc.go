// Package broker is the node: the topic table and its metadata, the
// partitions with their logs, high watermarks and idempotent-producer
// state, the fetch planner that applies KIP-74's budget, and the
// background work (retention) that keeps logs within their limits.
//
// It speaks weir's own types; the kafka package translates the wire
// protocol into calls here. Errors that a Kafka client must see are
// returned as *kerr.Error values so that the protocol layer can put their
// codes on the wire unchanged.
//
// # Concerns
//
// Broker composes what it holds:
//
//   - Security: authorization, ACLs, SCRAM users (acl.go, scram.go);
//   - ClusterView: the brokers, the controller and the partitions'
//     leaders and ISRs as the controller's state shows them
//     (cluster_view.go);
//   - Enterprise: the licence, the value each property takes effect
//     with, and the property watchers (license.go, watch.go);
//   - TopicTable: the topics and their local partitions as the
//     controller's view assigns them, changes to them through the
//     controller, and the configs their logs resolve from (topics.go,
//     topicconfig.go). A Topic holds the controller's record of the
//     topic (controller.Topic: name, id, configs, assignment and so the
//     replication factor), swapped for the new one when a view changes
//     it, and adds only what is local: the partitions open here and
//     what the produce path caches from the record. Nothing the
//     controller owns is copied, so nothing goes stale when a
//     reassignment or an AlterConfigs changes it;
//   - Replicas: opening the replicas the controller's view assigns
//     here, their Raft groups' members and leadership, copying records
//     from a leader, and the leaders' upkeep of their followers and ISRs
//     (replication.go, isr.go);
//   - a Partition per local replica: its log, Raft group, apply, ISR
//     tracking, epochs and checkpoints (partition.go, replica_fsm.go,
//     replication.go, isr.go, epochs.go);
//   - FetchPath: planning fetches under KIP-74's budget, where consumers
//     read (KIP-392), the read buffers and budget (memory.Reads) and the
//     read coalescer (fetch.go, follower_fetch.go, fetch_memory.go,
//     coalescing.go);
//   - ProducePath: checking produced batches and proposing them to
//     their partitions' groups, and idempotent producers' ids
//     (produce.go, producer.go);
//   - controllerNode: its part in the controller group, joining the
//     cluster and registering in it, and proposing commands (cluster.go,
//     controller.go), over the controller's state (broker/controller);
//   - the group coordinator (broker/group).
//
// Its own methods are its start, stop and background work (broker.go),
// applying the controller's views to those parts (reconcile.go,
// controller.go), listing offsets and deleting records (offsets.go),
// starting the group coordinator over __consumer_offsets (groups.go), its
// metrics (metrics.go), and changing the cluster's properties and
// reporting where they took effect (clusterconfig.go,
// clusterconfig_status.go).
//
// # Lock order
//
// A lock may be taken while holding one above it, never one below:
//
//	TopicTable.mu          the topic table (byName, byID) and closed
//	Partition.appendMu     the log and what is derived from it: the apply
//	                       goroutine, restore, retention, checkpoints
//	Partition.ckptMu       the newest checkpoint and its file
//	Partition.waitMu       waiting fetches
//
// The rest are leaves, held only around their own fields and never while
// taking another broker lock: Partition.leadMu (leadership reports, taken
// on the Raft dispatcher), epochCache.mu, leaderTracking.mu,
// controllerNode.mu (the reconciled index), licenseState.mu,
// watchers.mu, authorizerCache.buildMu. Two are held across calls out:
// Partition.coordMu around the group coordinator's load or unload of a
// __consumer_offsets partition (the coordinator's own locks come after
// it), and ProducePath.producerMu around the controller proposal that
// allocates a block of producer ids (a rare wait, once per thousand
// InitProducerId calls). The log, the coalescer and the Raft group lock
// for themselves below all of these. No lock is held while waiting for
// new data.
package broker
