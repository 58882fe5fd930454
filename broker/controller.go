package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/raft"
)

// controllerGroup is the Raft group holding the cluster metadata. Every
// node runs it; a single node is a cluster of one voter.
const controllerGroup = "controller"

// heartbeatEvery renews this broker's registration well within the
// controller's broker session timeout.
const heartbeatEvery = controller.DefaultBrokerSessionTimeout / 3

// proposeTimeout bounds one controller proposal.
const proposeTimeout = 15 * time.Second

// controllerNode is this broker's part in the controller group: the Raft
// group, the replicated state, joining the cluster and registering in it,
// and proposing commands, whose effect on the local materialisation of
// the state (the topic table) the reconcile goroutine reports back. The
// Broker composes it; its group opens with openController.
type controllerNode struct {
	node   config.Node
	logger *slog.Logger
	ctx    context.Context // ends when the broker stops

	mux   *raft.Mux
	group *raft.Group
	state *controller.State

	incarnation controller.IncarnationID
	epoch       uint64 // broker epoch from the registration

	changed chan struct{} // a new view was applied; capacity 1

	leaderless controllerLeaderless // replaceDeadLeader's, on its goroutine

	mu         sync.Mutex
	reconciled uint64        // index of the view the topic table reflects, by mu
	progress   chan struct{} // closed and replaced when reconciled advances, by mu
}

func newControllerNode(ctx context.Context, node config.Node, logger *slog.Logger) *controllerNode {
	return &controllerNode{node: node, logger: logger, ctx: ctx, changed: make(chan struct{}, 1), progress: make(chan struct{})}
}

// openController starts the controller group on rpc_addr, bootstraps it
// when the node is new, and waits until it leads and has applied every
// entry, so the broker starts from the whole metadata; then it keeps the
// topic table in step with the group's state.
func (b *Broker) openController() error {
	opts := controller.Options{ValidateTopicConfig: ValidateTopicConfig, CheckTopicReplication: CheckTopicReplication,
		Properties: b.props.Registry(), ValidateLicense: b.validateLicenseBlob}
	services := map[string]raft.Handler{
		servicePartitionRead: b.servePartitionRead, servicePartitionProgress: b.servePartitionProgress, serviceConfigStatus: b.serveConfigStatus,
		servicePartitionElect: b.servePartitionElect, serviceTxnMarkers: b.serveTxnMarkers,
		serviceTxnVerify: b.serveTxnVerify,
	}
	if err := b.ctrl.open(opts, b.registerer, services); err != nil {
		return err
	}
	b.done.Add(1)
	go b.reconcileLoop()
	return nil
}

// open starts the group, answering the cluster services and the
// broker's own on its mux; see openController.
func (c *controllerNode) open(opts controller.Options, registerer prometheus.Registerer, services map[string]raft.Handler) error {
	ln, err := net.Listen("tcp", c.node.RPCAddr)
	if err != nil {
		return fmt.Errorf("rpc listener: %w", err)
	}
	// A port of 0 (tests) is advertised as the one the listener got.
	addr := c.node.RPCAddr
	if _, port, _ := net.SplitHostPort(addr); port == "0" {
		addr = ln.Addr().String()
	}
	incarnation, err := loadIncarnation(c.node.DataDir)
	if err != nil {
		ln.Close()
		return err
	}
	mux, err := raft.NewMux(ln, raft.MuxConfig{Advertise: addr, Logger: c.logger, Registerer: registerer, Identity: incarnation.String(), HandOffBytes: config.RaftHandOffBytes(config.AvailableMemory())})
	if err != nil {
		ln.Close()
		return err
	}
	c.mux, c.incarnation = mux, incarnation
	c.state = controller.New(opts)
	c.state.Subscribe(func(controller.Change) {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	})
	id := strconv.Itoa(int(c.node.NodeID))
	cfg := raft.Config{
		Group: controllerGroup, NodeID: id, Dir: filepath.Join(c.node.DataDir, "raft"),
		StateMachine: controller.NewMachine(c.state),
	}
	if len(c.node.Seeds) == 0 {
		// One voter elects itself after the heartbeat timeout: keep it
		// short so a single node starts quickly. Clusters keep the
		// defaults, which tolerate a loaded machine.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = soloRaftTimeouts()
	}
	c.group, err = mux.Start(cfg)
	if err != nil {
		mux.Close()
		return err
	}
	if err := c.registerServices(addr, services); err != nil {
		mux.Close()
		return err
	}
	self := raft.Server{ID: id, Addr: addr, Voter: true}
	ctx, cancel := context.WithTimeout(c.ctx, joinTimeout)
	defer cancel()
	if !c.group.HasExistingState() {
		var err error
		if len(c.node.Seeds) == 0 {
			err = c.group.Bootstrap([]raft.Server{self})
		} else {
			err = c.bootstrapOrJoin(ctx, self)
		}
		if err != nil {
			mux.Close()
			return fmt.Errorf("form or join the cluster: %w", err)
		}
	}
	if err := c.awaitLeader(ctx); err != nil {
		mux.Close()
		return err
	}
	return nil
}

// awaitLeader waits until the controller group has a leader; the leader
// itself also waits until it has applied every entry (Barrier), so it
// starts from the whole metadata. A follower catches up as it applies.
func (c *controllerNode) awaitLeader(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if c.group.IsLeader() {
			return c.group.Barrier(ctx)
		}
		if _, addr := c.group.Leader(); addr != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controller group elected no leader: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// joinTimeout bounds forming or joining a cluster at start: every seed
// must answer, or one already in a cluster must take this node.
const joinTimeout = 60 * time.Second

// duplicateRegistrationWait is how long a broker whose node id is held by
// another incarnation keeps trying, as Kafka's brokers retry
// DUPLICATE_BROKER_REGISTRATION: a predecessor killed with its data
// directory replaced holds the id until its session expires, while a live
// process with the same id renews it and is still there afterwards.
const duplicateRegistrationWait = controller.DefaultBrokerSessionTimeout + 3*time.Second

// register initialises a new cluster (id and the node config's initial
// cluster properties), then registers this broker; its heartbeats
// (heartbeat) keep the registration live.
func (c *controllerNode) register() error {
	// The leader that finds no cluster id initialises the cluster; others
	// wait to see it applied.
	deadline := time.Now().Add(joinTimeout)
	for c.state.View().ClusterID() == "" && !c.group.IsLeader() {
		if time.Now().After(deadline) {
			return errors.New("the controller group has no cluster id yet")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c.state.View().ClusterID() == "" {
		if _, err := c.propose(controller.InitCluster{ClusterID: newClusterID()}); err != nil {
			return fmt.Errorf("initialise cluster: %w", err)
		}
		if len(c.node.Cluster) > 0 {
			changes := make([]controller.PropertyChange, 0, len(c.node.Cluster))
			for name, value := range c.node.Cluster {
				changes = append(changes, controller.PropertyChange{Name: name, Value: value})
			}
			if _, err := c.propose(controller.SetClusterProperties{ExpectedVersion: -1, Changes: changes}); err != nil {
				return fmt.Errorf("initial cluster properties: %w", err)
			}
		}
		c.logger.Info("created new cluster", "cluster_id", c.state.View().ClusterID(), "data_dir", c.node.DataDir)
	}
	reg := controller.RegisterBroker{
		NodeID: c.node.NodeID, Incarnation: c.incarnation, KafkaAddr: c.node.AdvertisedKafkaAddr,
		RPCAddr: c.node.RPCAddr, Rack: c.node.Rack, AdminAddr: c.node.AdminAddr,
		Listeners: registeredListeners(c.node.Listeners),
	}
	// Registering again is harmless (the same incarnation keeps its
	// epoch), so a controller that lost leadership mid-proposal (outcome
	// unknown) or has none yet is retried, as a restarting broker meets
	// while the cluster elects, and so is a proposal that timed out
	// behind a busy controller (thousands of partitions failing over).
	deadline = time.Now().Add(joinTimeout)
	duplicateDeadline := time.Now().Add(duplicateRegistrationWait)
	res, err := c.propose(reg)
	for err != nil && time.Now().Before(deadline) &&
		(errors.Is(err, kerr.NotController) || errors.Is(err, kerr.RequestTimedOut) ||
			errors.Is(err, kerr.DuplicateBrokerRegistration) && time.Now().Before(duplicateDeadline)) {
		c.logger.Info("registering again: no controller took the registration", "err", err)
		select {
		case <-time.After(200 * time.Millisecond):
		case <-c.ctx.Done():
			return fmt.Errorf("register broker %d: %w", c.node.NodeID, err)
		}
		res, err = c.propose(reg)
	}
	if err != nil {
		return fmt.Errorf("register broker %d: %w", c.node.NodeID, err)
	}
	c.epoch = res.BrokerEpoch
	return nil
}

// propose applies a command through the controller group and waits until
// the topic table reflects it. Refusals come back as the command's Kafka
// error; a controller that cannot commit is NOT_CONTROLLER (retriable).
func (c *controllerNode) propose(cmd controller.Command) (controller.Result, error) {
	ctx, cancel := context.WithTimeout(c.ctx, proposeTimeout)
	defer cancel()
	return c.proposeCtx(ctx, cmd, true)
}

// proposeCtx is propose bounded by ctx; reconciled says whether to wait
// for the local topic table too, or only for the commit. A command whose
// ctx ends after it was committed still takes effect everywhere: the
// error then is REQUEST_TIMED_OUT, as Kafka answers a request whose
// change outlived its timeout.
func (c *controllerNode) proposeCtx(ctx context.Context, cmd controller.Command, reconciled bool) (controller.Result, error) {
	// Controller time is wall time, whatever clock the broker's logs use:
	// liveness is judged against it.
	data, err := controller.Encode(controller.Entry{TimeMs: time.Now().UnixMilli(), Cmd: cmd})
	if err != nil {
		return controller.Result{}, fmt.Errorf("%w: %v", kerr.InvalidRequest, err)
	}
	res, index, err := c.applyCommand(ctx, data)
	if err != nil {
		return controller.Result{}, err
	}
	if res.Err != nil {
		return res, res.Err
	}
	if !reconciled {
		return res, nil
	}
	if err := c.waitReconciled(ctx, index); err != nil {
		return res, fmt.Errorf("%w: %v", kerr.RequestTimedOut, err)
	}
	return res, nil
}

// check answers a command without proposing it: validate-only requests.
func (c *controllerNode) check(cmd controller.Command) (controller.Result, error) {
	res := c.state.Check(controller.Entry{TimeMs: time.Now().UnixMilli(), Cmd: cmd})
	return res, res.Err
}

func (c *controllerNode) waitReconciled(ctx context.Context, index uint64) error {
	for {
		c.mu.Lock()
		done, progress := c.reconciled >= index, c.progress
		c.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return errors.New("broker is shutting down")
		}
	}
}

// reconcileLoop keeps the local topic table in step with the controller's
// view: it opens, grows and reconfigures partitions and removes deleted
// topics. It runs off the apply goroutine because opening logs does I/O.
func (b *Broker) reconcileLoop() {
	defer b.done.Done()
	c := b.ctrl
	b.reconcile(c.state.View())
	for {
		select {
		case <-b.stop:
			return
		case <-c.changed:
			b.reconcile(c.state.View())
		}
	}
}

// heartbeat renews this broker's registration.
func (c *controllerNode) heartbeat() {
	_, err := c.propose(controller.Heartbeat{NodeID: c.node.NodeID, Epoch: c.epoch})
	if err != nil && !errors.Is(err, kerr.NotController) {
		c.logger.Warn("controller heartbeat refused", "err", err)
	}
}

func newPlacementSeed() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}

// incarnationFile holds the broker's incarnation id: drawn when the data
// directory is created, so a restart is the same broker to the controller
// and another process claiming the node id with other data is not.
//
// Format: the id in URL-safe base64, one line.
const incarnationFile = "incarnation"

func loadIncarnation(dir string) (controller.IncarnationID, error) {
	var id controller.IncarnationID
	path := filepath.Join(dir, incarnationFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if err := id.UnmarshalText(bytes.TrimSpace(b)); err != nil {
			return id, fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return id, fmt.Errorf("read incarnation: %w", err)
	}
	_, _ = rand.Read(id[:])
	text, _ := id.MarshalText()
	if err := log.WriteFileAtomic(nil, path, append(text, '\n')); err != nil {
		return id, fmt.Errorf("write incarnation: %w", err)
	}
	return id, nil
}
