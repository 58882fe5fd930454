// Package raft runs weir's Raft groups on hashicorp/raft: the controller
// group (cluster metadata, raft/controller) and, later, one group per
// partition. It is the only package that imports hashicorp/raft; the rest
// of weir sees Mux, Group, Config, Server and this package's errors. (An
// FSM implements raft.FSM, so FSMs live under raft/ too.)
//
// # Pieces
//
//	mux.go      one TCP listener per broker (rpc_addr) for every group;
//	            a versioned stream header names the group (format drawn there)
//	group.go    Start, Bootstrap, Apply, Barrier, membership, Shutdown
//	rpc.go      request/response services on the same listener (Handle,
//	            Call) for brokers' control messages; frame format drawn there
//	rpc_client.go  the calling side: a connection pool per (peer, service)
//	rpc_frame.go   frame codec and RPC metrics
//	config.go   per-group Config and the timer defaults, sized for many groups
//	store.go    per-group raft-wal log/stable store and file snapshots
//	metrics.go  Prometheus collectors
//	errors.go   ErrNotLeader (*NotLeaderError), ErrLeadershipLost, …
//	logging.go  hclog → log/slog bridge for raft, its transport and raft-wal
//
// Lock order: Mux.mu and layer.mu are never held together, nor while
// calling into hashicorp/raft. Group.Shutdown runs outside Mux.mu (Mux.Close
// copies the group list first).
//
// # Transport cost, and the later optimisation
//
// Every group has its own raft.NetworkTransport over its own StreamLayer on
// the shared listener: the port is shared, connections are not. Each group
// keeps up to Config.MaxPool idle outbound connections per peer, plus a
// pipeline connection per follower while it leads, and each inbound one
// costs a goroutine on the receiving node. So connections ≈ groups × peers
// × (1–3), measured at 14 file descriptors per idle 3-replica group in
// total across its 3 nodes (TestIdleCost, below). That is fine for the
// controller and tens of partitions, not for thousands. The later step is a
// custom raft.Transport with one connection (or a small pool) per peer
// shared by all groups, which is also where heartbeats for all groups to a
// peer can be batched into one message (Redpanda's heartbeat_manager;
// evrblk/monstera does the single stream on hashicorp/raft). Mux.Layer and
// the header stay useful for the controller and for tools.
//
// # Log store: raft-wal, measured
//
// Both candidates fsync before StoreLogs returns. BenchmarkLogStore on this
// machine (2 vCPU AMD EPYC, virtio disk, ext4), one op = one StoreLogs call:
//
//	go test -run '^$' -bench BenchmarkLogStore -benchtime 2s ./raft/
//
//	wal/entry=1KiB/batch=1     221911 ns/op    4.61 MB/s    4506 entries/s     1533 B/op     8 allocs/op
//	bolt/entry=1KiB/batch=1    560783 ns/op    1.83 MB/s    1783 entries/s    34236 B/op    92 allocs/op
//	wal/entry=1KiB/batch=64    414543 ns/op  158.09 MB/s  154387 entries/s    92044 B/op   387 allocs/op
//	bolt/entry=1KiB/batch=64  1267225 ns/op   51.72 MB/s   50504 entries/s   366505 B/op  2012 allocs/op
//	wal/entry=16KiB/batch=1    341400 ns/op   47.99 MB/s    2929 entries/s    19237 B/op     8 allocs/op
//	bolt/entry=16KiB/batch=1   622278 ns/op   26.33 MB/s    1607 entries/s   178899 B/op   101 allocs/op
//	wal/entry=16KiB/batch=64  3355619 ns/op  312.48 MB/s   19072 entries/s  1736508 B/op   416 allocs/op
//	bolt/entry=16KiB/batch=64 7175943 ns/op  146.12 MB/s    8919 entries/s  5734670 B/op  2288 allocs/op
//
// raft-wal is 2.1–3.1× faster (one fsync per append against bbolt's two,
// and no B+tree copy-on-write: 4–16× fewer allocations) and does not slow
// down after large truncations as bbolt's freelist does. Against it: it is
// still marked experimental (Consul, Vault and Nomad ship it opt-in), it
// only truncates whole ranges at the head or tail (all Raft needs), and it
// preallocates segments, so the segment size is disk per group
// (Config.LogSegmentSize, default 8 MiB instead of its 64 MiB). Its head
// truncation is lazy: entries below FirstIndex stay readable until their
// whole segment is deleted, so a leader may replicate old entries instead
// of sending a snapshot — correct, and it only matters to a test that wants
// InstallSnapshot (TestSnapshotRestore uses 4 KiB segments for that).
//
// raft-wal v0.4.2 and raft-boltdb/v2 v2.3.1 import go-metrics/compat,
// which go-metrics v0.7.0 (required by hashicorp/raft v1.8.0) removed. The
// root package of v0.6.1 is the same code as v0.7.0's, so go.mod replaces
// go-metrics with v0.6.1 until raft-wal tags a release without compat.
// Neither library's go-metrics output is wired anywhere (it goes to the
// blackhole sink); weir's metrics are below.
//
// # Idle cost per group, measured
//
// hashicorp/raft has no shared tick and no quiescing, so an idle group
// still pays its own timers (Config documents the RPC rates). TestIdleCost,
// 100 idle 3-voter groups over 3 in-process nodes for 10 s, one entry
// applied to each first (same machine, no -race):
//
//	                           goroutines    fds    CPU (one core = 100%)
//	weir defaults               31.0/group   14.0   0.25%/group  (0.083%/replica)
//	  (2s/2s/1s/200ms, MaxPool 2)
//	hashicorp defaults          31.2/group   14.4   0.60%/group  (0.20%/replica)
//	  (1s/1s/500ms/50ms, MaxPool 3)
//
// A group is ~10 goroutines per replica (run, runFSM, runSnapshots, the
// transport's accept loop, weir's leader watcher, inbound connection
// handlers; a leader adds replicate, heartbeat and pipeline decode per
// follower). At weir's defaults 1,000 idle partition replicas on one broker
// would be ~10,000 goroutines and ~0.8 of a core doing nothing: past a few
// hundred groups per broker, the shared transport with batched heartbeats
// (above) is needed, or a multi-raft library (etcd-io/raft, dragonboat).
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
//	weir_raft_leader_changes_total{group}         leaders this node observed
//	weir_raft_commit_latency_seconds{class}       Apply → applied on the leader
//	weir_raft_applied_index{group}                read from raft at scrape time
//	weir_raft_commit_index{group}                 read from raft at scrape time
//	weir_raft_is_leader{group}                    read from raft at scrape time
//	weir_raft_mux_connections_total{result,reason} accepted / rejected
//	                                              (bad_header, unknown_group, closed)
//
// Per-group series exist only while the group runs here; the histogram is
// by Config.Class, not by group, so a thousand partitions do not make
// twelve thousand histogram series.
package raft
