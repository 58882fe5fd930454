// Package raft runs weir's Raft groups on hashicorp/raft: the controller
// group and one group per partition, thousands per process over one
// shared transport and one shared log. It is consensus plumbing only: the
// state machines live with the domain (broker.Partition, and the cluster
// metadata in broker/controller) and reach it through StateMachine
// (statemachine.go). It is the only package that imports hashicorp/raft;
// the rest of weir sees Mux, Group, Config, Server, StateMachine and this
// package's errors.
//
// # Pieces
//
//	mux.go      one TCP listener per broker (rpc_addr) for every stream;
//	            a versioned stream header names it (format drawn there)
//	group.go    Start, Bootstrap, Campaign, Apply, Barrier, membership,
//	            Shutdown
//	transport*.go  the node's shared Raft transport: every group's RPCs to
//	            a peer on two connections, heartbeats batched (below)
//	walstore/   the node's shared Raft log and stable store, group commit
//	store.go    a group's view of the shared log, its snapshots, removal,
//	            and the one-time migration of a per-group raft-wal
//	rpc.go      request/response services on the same listener (Handle,
//	            Call) for brokers' control messages; frame format drawn there
//	rpc_client.go  the calling side: a connection pool per (peer, service)
//	rpc_frame.go   frame codec and RPC metrics
//	config.go   per-group Config and the timer defaults
//	catchup.go  the leader wakes a stalled follower's replication
//	transport_stream.go  pipelines only to followers entries stream to
//	statemachine.go  StateMachine, weir's view of hashicorp's FSM
//	                 (BatchStateMachine: committed entries in one call)
//	metrics.go  Prometheus collectors
//	errors.go   ErrNotLeader (*NotLeaderError), ErrLeadershipLost, …
//	logging.go  hclog → log/slog bridge for raft and raft-wal
//
// Lock order: Mux.mu and layer.mu are never held together, nor while
// calling into hashicorp/raft. Group.Shutdown runs outside Mux.mu (Mux.Close
// copies the group list first). Mux.storeMu may take Mux.mu, never the
// reverse; the transport's own order is in transport.go.
//
// # Many groups per process: the multi-Raft layer
//
// hashicorp/raft is the consensus engine of every group, unchanged; it has
// no notion of other groups (hashicorp/raft#290), so everything a group
// would otherwise own alone is shared here, as production multi-Raft
// systems share it (CockroachDB's coalesced heartbeats, TiKV's shared Raft
// engine, Redpanda's per-node heartbeat manager):
//
//   - Transport (transport.go): one hub per node; per peer member address
//     a control connection (heartbeat batches, votes, pre-votes,
//     TimeoutNow) and a data connection (appends, pipelined, entries
//     written straight from the Log slices with writev), and a connection
//     of its own per InstallSnapshot. Each group has a groupTransport,
//     its hraft.Transport, whose Close detaches only that group. The
//     heartbeats of all groups to a peer wait up to their group's delay
//     (a fraction of its timers, at most 250 ms: Config.transportDelay)
//     and go as one frame; the receiver runs each group's own heartbeat
//     handler and sends every group's real answer back in one frame.
//     Appends that only carry the commit index, and their answers, wait
//     the same way to share a writev with whatever else goes to that
//     peer. Nothing is ever answered on a group's behalf. A heartbeat
//     to a peer that cannot be reached waits in the queue for the next
//     dial (up to its caller's timeout) instead of failing at once, so
//     hashicorp's backoff of failed heartbeats does not delay the first
//     one after the peer is back. A heartbeat to
//     a follower behind the leader's commit index carries it, with the
//     entry up to which the follower is known to match
//     (transport_commit.go), and the follower's Raft gets it as an
//     append without entries, so CommitTimeout's keep-alive need not
//     run often; nodes announce that they take such notices in their
//     heartbeat answers, so older peers never see them. The keep-alive's
//     other role, retrying a follower whose append failed, is the
//     leader's: a follower that answers heartbeats but stays behind
//     without acknowledging appends gets a barrier written for it, which
//     wakes its replication (catchup.go). A leader's replication of a
//     follower is pipelined (hashicorp's second goroutine per follower,
//     reading the answers) only while entries stream to it: the
//     transport offers a pipeline after two acknowledged appends with
//     entries a second apart at most, and ends one at its first
//     keep-alive after they stop (transport_stream.go), so an idle
//     group's leader has one replication goroutine per follower.
//   - Logging: each group logs through the broker's slog logger
//     (logging.go); its errors about a peer (failed heartbeats, appends,
//     votes, each retry) pass a node-wide limit of one line per message
//     and peer every 5 s, the next line counting those held back, so a
//     dead broker does not make every survivor log hundreds of lines a
//     second. Connections scale with peers,
//     not groups; an idle group has no goroutine and no connection.
//   - Proposals (proposal.go): hashicorp's futures have no channel, so
//     a group learns its proposals' outcomes on one goroutine, in
//     proposal order (the order hashicorp answers them), and hands each
//     to a channel a waiter selects on or to the proposer's function;
//     the goroutine runs only while proposals are outstanding.
//   - Log store (walstore/): one write-ahead log per node for every
//     group's entries, truncations and term/vote, with a per-group index
//     in memory; StoreLogs returns after the fsync that covers it, and the
//     next batch forms while an fsync is in flight, so concurrent appends
//     of many groups share one fsync (group commit) without a timer. No
//     per-group file or preallocation: an empty group is a few hundred
//     bytes of index. Snapshots stay per group (FileSnapshotStore).
//     While a group follows, its entries are stored with the store's
//     hand-off (group_log.go, walstore/handoff.go): the apply takes each
//     from memory, as the transport decoded it, instead of reading back
//     what was fsynced a moment before.
//   - Timers: still per group (hashicorp/raft's own), so their defaults
//     are what an idle group costs; broker/replication.go sizes a
//     partition's for thousands of groups and states the failover
//     bound, and broker/failover.go replaces a dead leader sooner from broker
//     liveness (Group.Campaign), as CockroachDB wakes quiesced ranges
//     when their leader's node liveness lapses.
//     Config.LeaderHeartbeatTimeout gives a group a longer heartbeat
//     timeout while this node leads it (ReloadConfig on each leadership
//     change, leadership.go): the leader's heartbeat rate falls while
//     the followers' timeout, which decides when they stand, does not
//     change. Group.NotifyFollowers sends a leader's heartbeats (and the
//     commit notices they carry) at once, for an owner that sees a
//     follower lag the commit index while no append is coming.
//   - Creation: a brand-new group's preferred leader calls Campaign right
//     after Bootstrap, so it is led in milliseconds rather than after a
//     heartbeat timeout; the broker opens a topic's replicas in parallel,
//     so their bootstraps share fsyncs.
//
// Upgrading: a group whose directory still holds the raft-wal of earlier
// versions (<dir>/<group>/wal) is copied into the shared log at its first
// Start and the old directory removed only after every entry and key was
// fsynced there (store.go); an interrupted copy is redone from scratch.
//
// # RPC services on the same listener
//
// Mux.Handle registers a request/response service and Mux.Call calls one
// on a peer (rpc.go; cluster control messages such as hello, join and
// forward). A service is a stream like a group's: the dialer's stream
// header names "_rpc."+service, so one name table holds groups and
// services and neither can take the other's name. After the header both
// directions are frames, drawn in rpc.go:
//
//	version(1)=1 | flags(1) | request id(4) | timeout ms(4) | length(4) | payload
//
// flags 0x01 marks a response and 0x03 a handler's error, whose payload is
// the error text (the caller gets a *RemoteError). The request carries the
// caller's remaining ctx time, which becomes the handler's deadline.
// Payloads are at most RPCMaxPayload (16 MiB), checked before allocating;
// any malformed frame closes its connection only. One request is in
// flight per connection; callers keep up to 2 idle connections per (peer,
// service), each with a reader that drops it from the pool if the peer
// hangs up. Call never retries: a ctx that ends closes the connection, and
// a connection that breaks after the request was written leaves the
// outcome unknown. Mux.Close cancels handlers' ctx, waits for them, and
// closes pooled connections. The RPC state is a field of the Mux, created
// on first use; lock order there is Mux.rpcMu before Mux.mu.
//
//	weir_raft_rpc_calls_total{service,outcome}      calls made: ok, remote_error,
//	                                                dial_error, conn_error, deadline,
//	                                                canceled, closed, invalid
//	weir_raft_rpc_call_duration_seconds{service}    calls answered (ok, remote_error)
//	weir_raft_rpc_handled_total{service,outcome}    requests served: ok, error, bad_frame
//
// # Metrics
//
//	weir_raft_groups{role}                        groups running here by role
//	weir_raft_leader_changes_total{group}         leaders this node observed
//	weir_raft_commit_latency_seconds{class}       Apply → applied on the leader
//	weir_raft_applied_index{group}                read from raft at scrape time
//	weir_raft_commit_index{group}                 read from raft at scrape time
//	weir_raft_last_index{group}                   read from raft at scrape time
//	weir_raft_is_leader{group}                    read from raft at scrape time
//	weir_raft_mux_connections_total{result,reason} accepted / rejected
//	                                              (bad_header, unknown_group, closed)
//	weir_raft_transport_heartbeat_frames_total{direction}
//	weir_raft_transport_heartbeats_total{direction}   ÷ frames = groups per frame
//	weir_raft_transport_heartbeats_held_total     heartbeats kept for a peer's next dial
//	weir_raft_transport_heartbeat_batch_groups    histogram of groups per frame
//	weir_raft_follower_catch_ups_total            barriers written to wake a stalled follower
//	weir_raft_transport_frames_total{direction}, _bytes_total{direction}
//	weir_raft_transport_connections{direction}
//	weir_raft_transport_rpc_errors_total{kind}
//	weir_raft_log_fsyncs_total                    shared log fsyncs
//	weir_raft_log_batch_records                   records per fsync (group commit)
//	weir_raft_log_batch_groups                    groups per fsync
//	weir_raft_log_sync_seconds                    fsync latency
//	weir_raft_log_bytes_written_total, _relocated_bytes_total, _segments, _groups
//
// Per-group series exist only while the group runs here; the histogram is
// by Config.Class, not by group, so a thousand partitions do not make
// twelve thousand histogram series.
package raft
