package broker

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/broker/group"
	"github.com/weir-broker/weir/broker/txn"
	"github.com/weir-broker/weir/coalescer"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/raft"
)

// Options are what a Broker needs from the process that runs it.
type Options struct {
	Node   config.Node
	Logger *slog.Logger
	// Registerer receives the Raft metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// RetentionCheckInterval is how often logs are checked against
	// retention.ms and retention.bytes (Kafka's
	// log.retention.check.interval.ms). Zero means 30 seconds.
	RetentionCheckInterval time.Duration
	// Now is the clock; nil means time.Now. Tests set it.
	Now func() time.Time
	// LicenseKeys are the public keys licenses must be signed with; nil
	// means config.TrustedLicenseKeys(). Tests sign with their own.
	LicenseKeys []ed25519.PublicKey
	// LogFS is the storage partition logs live on; nil means the OS.
	// Tests inject write and fsync failures through it.
	LogFS log.FS
	// Context bounds Open: when it ends, Open gives up (waiting for a
	// controller to join or register with can take a minute) and
	// returns an error that wraps the context's. A broker Open returned
	// is stopped by Close only. nil: Open runs to the end.
	Context context.Context
}

// Broker is one weir node.
type Broker struct {
	node       config.Node
	logger     *slog.Logger
	registerer prometheus.Registerer
	props      *config.Values // mirror of the controller's cluster properties

	now   func() time.Time
	logFS log.FS

	ctrl *controllerNode
	// Security is authorization, ACLs and SCRAM users (acl.go, scram.go).
	Security
	// Enterprise is the licence, the properties' effective values and
	// their watchers (license.go, watch.go).
	Enterprise
	// ClusterView is the brokers, the controller and the partitions'
	// leaders as the controller's state shows them (cluster_view.go).
	ClusterView

	// startProps holds the NeedsRestart properties' values as this
	// process started with them (see ConfigStatus.Restart).
	startProps atomic.Pointer[map[string]string]

	// TopicTable is the topics and their local partitions as the
	// controller's view assigns them (topics.go, topicconfig.go).
	TopicTable
	// Replicas are the partition replicas the topic table holds, their
	// Raft groups and leadership (replication.go, isr.go).
	Replicas
	// FetchPath plans fetches and owns their read buffers, budget and
	// coalescer (fetch.go, follower_fetch.go, fetch_memory.go,
	// coalescing.go).
	FetchPath
	// ProducePath checks and proposes produced batches and hands out
	// producer ids (produce.go, producer.go).
	ProducePath

	// groups is the group coordinator, set once __consumer_offsets exists.
	groups atomic.Pointer[group.Coordinator]
	// cleaner compacts the local replicas of compacted topics (cleaner.go).
	cleaner *logCleaner
	// txns is the transaction coordinator (txns.go), set once at Open.
	txns atomic.Pointer[txn.Coordinator]

	// ctx ends when the broker stops (cancel, from Close or a failed
	// Open): its background work stops and its own waits (joining,
	// controller proposals) give up. stop is ctx.Done().
	ctx    context.Context
	cancel context.CancelFunc
	stop   <-chan struct{}
	done   sync.WaitGroup
}

// Open starts the node: the controller group (bootstrapped on a new data
// directory), the partition logs the controller's view assigns here
// (recovering what a crash left behind), and the group coordinator.
func Open(opts Options) (*Broker, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LicenseKeys == nil {
		opts.LicenseKeys = config.TrustedLicenseKeys()
	}
	if opts.RetentionCheckInterval <= 0 {
		opts.RetentionCheckInterval = 30 * time.Second
	}
	if err := os.MkdirAll(filepath.Join(opts.Node.DataDir, topicsDir), 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	props, err := config.NewValues(config.NewRegistry(), nil)
	if err != nil {
		return nil, err
	}
	b := newBroker(opts, props)
	if opts.Context != nil {
		stopWaiting := context.AfterFunc(opts.Context, b.cancel)
		defer stopWaiting()
	}
	// An error while opts.Context ended says so (errors.Is(err,
	// context.Canceled)): the process was told to stop while starting.
	stopped := func(err error) error {
		if opts.Context != nil && opts.Context.Err() != nil {
			return fmt.Errorf("%w (%w)", err, opts.Context.Err())
		}
		return err
	}
	fail := func(err error) (*Broker, error) {
		b.Close()
		return nil, stopped(err)
	}
	if err := b.openController(); err != nil {
		b.cancel()
		return nil, stopped(err)
	}
	if err := b.ctrl.register(); err != nil {
		return fail(err)
	}
	b.every(heartbeatEvery, b.ctrl.heartbeat)
	b.removeOrphanTopicDirs()
	b.removeUnassignedReplicas(b.Topics())
	if err := b.openGroups(); err != nil {
		return fail(fmt.Errorf("group coordinator: %w", err))
	}
	b.openTransactions()
	b.awaitReplicaLeaders()
	b.recordStartProperties()
	b.registerMetrics()
	if !b.props.Bool("disable_metrics") {
		b.registerThrottleMetrics(b.registerer)
		b.registerVerifyMetrics()
	}
	b.openFetchMemory()
	if err := b.openCoalescer(); err != nil {
		return fail(err)
	}
	b.registerLicenseMetrics()
	b.registerFetchRoleMetrics()
	b.logPropertyChanges()
	b.every(licenseCheckEvery, b.checkLicense)
	// Followers' progress reports run apart from the leaders' upkeep,
	// whose controller proposals may wait: a late report would drop a
	// caught-up follower from its leaders' ISR.
	b.every(replicaProgressEvery, b.reportProgress)
	b.every(replicaProgressEvery, b.maintainLeaders)
	b.every(replicaProgressEvery, b.replaceDeadLeaders)
	b.every(replicaProgressEvery, b.ctrl.replaceDeadLeader)
	b.every(opts.RetentionCheckInterval, func() { b.EnforceRetention(context.Background()) })
	b.startCleaner()
	// Reads the coalescer retained for later fetches go once they aged,
	// also when no newer read comes to push them out.
	b.every(coalescer.DefaultRetainFor/2, b.coalescer.Expire)
	return b, nil
}

// newBroker builds the Broker and the parts it composes, each handed what
// it needs of the others; none runs until Open starts them. opts has its
// defaults.
func newBroker(opts Options, props *config.Values) *Broker {
	b := &Broker{
		node:       opts.Node,
		logger:     opts.Logger,
		registerer: opts.Registerer,
		props:      props,
		now:        opts.Now,
		logFS:      opts.LogFS,
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.stop = b.ctx.Done()
	b.ctrl = newControllerNode(b.ctx, opts.Node, opts.Logger)
	view := func() *controller.View { return b.ctrl.state.View() }
	// The logs' and produce's clock is whatever b.now is when read: a
	// test sets it after Open.
	now := func() time.Time { return b.now() }
	b.Security = newSecurity(props, view, b.ctrl.propose, opts.Logger)
	b.Enterprise = newEnterprise(props, view, b.ctrl.propose, opts.Logger, opts.Now, opts.LicenseKeys, opts.Registerer)
	var pageCache *log.PageCache
	if n := opts.Node.LogPageCacheBytes; n > 0 {
		pageCache = log.NewPageCache(n)
		if opts.Registerer != nil && !props.Bool("disable_metrics") {
			registerPageCacheMetrics(opts.Registerer, pageCache, opts.Logger)
		}
	}
	b.TopicTable = newTopicTable(topicTableDeps{
		dataDir: opts.Node.DataDir, props: props, logger: opts.Logger, now: now, logFS: opts.LogFS, view: view,
		pageCache: pageCache,
		propose:   b.ctrl.propose, check: b.ctrl.check, waitReconciled: b.ctrl.waitReconciled, stop: b.stop,

		commit: func(ctx context.Context, cmd controller.Command) (controller.Result, error) {
			return b.ctrl.proposeCtx(ctx, cmd, false)
		},
	})
	b.Replicas = newReplicas(replicaDeps{
		node: opts.Node, props: props, logger: opts.Logger, view: view, propose: b.ctrl.propose,
		topicDir: b.topicDir, logConfig: b.logConfigFor, groups: b.Groups, txns: b.txns.Load, stop: b.stop, done: &b.done,

		mux:         func() *raft.Mux { return b.ctrl.mux },
		incarnation: func() controller.IncarnationID { return b.ctrl.incarnation },
	})
	b.ClusterView = newClusterView(opts.Node.NodeID, view, func() (string, string) { return b.ctrl.group.Leader() })
	b.ProducePath = newProducePath(producePathDeps{nodeID: opts.Node.NodeID, now: now, heldEntryBytes: opts.Node.QueuedMaxRequestBytes,
		topic: b.Topic, autoCreate: b.autoCreate, produceSettings: b.produceSettings, propose: b.ctrl.propose,
		inSyncReplicas: func(p *Partition) []int32 { return b.inSyncReplicas(p) },
		brokerEpoch:    func() uint64 { return b.ctrl.epoch },

		verifyTxn:        b.newTxnVerifier().verify,
		verifyTxnEnabled: func() bool { return props.Bool("transaction_partition_verification_enable") },
		verifications:    newVerifyResults(),
	})
	b.FetchPath = newFetchPath(fetchPathDeps{node: opts.Node, props: props, logger: opts.Logger, registerer: opts.Registerer,
		liveBroker: b.ClusterView.Broker, watchProperty: b.WatchProperty})
	return b
}

func newClusterID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Close stops background work, the group coordinator and the controller
// group, and closes every log, flushing it.
func (b *Broker) Close() error {
	if !b.shut() {
		return nil
	}
	b.cancel()
	b.done.Wait()
	if c := b.groups.Load(); c != nil {
		c.Close()
	}
	if c := b.txns.Load(); c != nil {
		c.Close()
	}
	if b.coalescer != nil {
		b.coalescer.Close()
	}
	var errs []error
	if b.ctrl.mux != nil {
		errs = append(errs, b.ctrl.mux.Close())
	}
	return errors.Join(append(errs, b.closeReplicas())...)
}

// NodeID is this broker's id.
func (b *Broker) NodeID() int32 { return b.node.NodeID }

// ClusterID is the cluster's id, fixed at creation.
func (b *Broker) ClusterID() string { return b.ctrl.state.View().ClusterID() }

// Node returns the node config the broker runs with.
func (b *Broker) Node() config.Node { return b.node }

// Properties are the cluster properties.
func (b *Broker) Properties() *config.Values { return b.props }

// Ready reports whether the broker serves requests.
func (b *Broker) Ready() bool { return !b.isClosed() }

// every runs fn every interval on its own goroutine until the broker
// stops.
func (b *Broker) every(interval time.Duration, fn func()) {
	b.done.Add(1)
	go func() {
		defer b.done.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-tick.C:
				fn()
			}
		}
	}()
}

// startCleaner starts the log cleaner's threads, stopped with the broker.
func (b *Broker) startCleaner() {
	b.cleaner = newLogCleaner(b.cleanTargets, b.props, b.now, b.logger)
	if b.registerer != nil && !b.props.Bool("disable_metrics") {
		if err := b.registerer.Register(b.cleaner); err != nil {
			b.logger.Warn("registering log cleaner metrics", "err", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.done.Add(1)
	go func() {
		defer b.done.Done()
		<-b.stop
		cancel()
	}()
	b.cleaner.start(ctx, &b.done, int(b.props.Int("log_cleaner_threads")))
}

// cleanTargets lists the local replicas of compacted topics.
func (b *Broker) cleanTargets() []cleanTarget {
	var out []cleanTarget
	for _, t := range b.Topics() {
		c, ok := compactionOf(b.TopicConfig(t))
		if !ok {
			continue
		}
		for _, p := range t.partitions() {
			if p != nil && p.log != nil {
				out = append(out, cleanTarget{topic: t, p: p, c: c})
			}
		}
	}
	return out
}

// CleanLogs wakes the log cleaner to look for work now, as it does every
// log_cleaner_backoff_ms.
func (b *Broker) CleanLogs() { b.cleaner.poke() }

// EnforceRetention applies retention.ms and retention.bytes to every
// partition now.
func (b *Broker) EnforceRetention(ctx context.Context) {
	for _, t := range b.Topics() {
		for _, p := range t.partitions() {
			if ctx.Err() != nil {
				return
			}
			if p == nil {
				continue
			}
			n, err := p.enforceRetention()
			if err != nil {
				b.logger.Warn("retention", "topic", t.Name(), "partition", p.Index, "err", err)
			} else if n > 0 {
				b.logger.Info("retention removed segments", "topic", t.Name(), "partition", p.Index, "segments", n, "log_start_offset", p.log.LogStartOffset())
			}
		}
	}
}
