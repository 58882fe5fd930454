package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupTopic is the broker's internal topic of consumer group offsets.
const groupTopic = "__consumer_offsets"

// requestTimeout bounds one request the test sends to one broker.
const requestTimeout = 5 * time.Second

// ClusterConfig describes a cluster to start.
type ClusterConfig struct {
	Brokers   int
	Bin       string   // the weir binary
	Dir       string   // parent of every broker's data directory and log
	Net       Network  // where the brokers live
	ExtraArgs []string // appended to every broker's command line
	Env       []string // KEY=value added to every broker's environment
	Logf      func(format string, args ...any)
}

// Cluster is a running set of brokers that know each other as seeds.
type Cluster struct {
	Nodes []*Node
	Net   Network
	logf  func(string, ...any)

	mu     sync.Mutex
	direct map[int]*kgo.Client
}

// StartCluster starts cfg.Brokers brokers (node ids 0..n-1) and waits until
// every one is ready and all agree on the brokers and the controller.
// On an error the brokers started are stopped again.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	c := &Cluster{Net: cfg.Net, logf: cfg.Logf, direct: map[int]*kgo.Client{}}
	rpcAddrs := make([]string, cfg.Brokers)
	for i := range cfg.Brokers {
		probe := newNode(i, cfg.Net, cfg.Bin, cfg.Dir, nil, nil, nil)
		rpcAddrs[i] = probe.RPCAddr
	}
	for i := range cfg.Brokers {
		var seeds []string
		for j, a := range rpcAddrs {
			if j != i {
				seeds = append(seeds, a)
			}
		}
		c.Nodes = append(c.Nodes, newNode(i, cfg.Net, cfg.Bin, cfg.Dir, seeds, cfg.ExtraArgs, cfg.Env))
	}
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			c.StopAll()
			return nil, err
		}
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.WaitReady(ctx, readyTimeout) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.StopAll()
		return nil, err
	}
	if err := c.WaitHealthy(ctx, nil, readyTimeout); err != nil {
		c.StopAll()
		return nil, err
	}
	return c, nil
}

// KafkaAddrs are the brokers' Kafka addresses.
func (c *Cluster) KafkaAddrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.KafkaAddr
	}
	return out
}

// ClientOpts are kgo options for a client of the whole cluster that rides
// through failovers quickly: metadata refreshed often, short backoff, and
// requests to a broker that stopped answering (SIGSTOP, a cut link) given
// up after seconds rather than the default 20 s.
func (c *Cluster) ClientOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(c.KafkaAddrs()...),
		kgo.Dialer(c.Net.DialContext),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RequestTimeoutOverhead(3 * time.Second),
		kgo.DialTimeout(2 * time.Second),
	}
}

// directClient is a client seeded with broker id alone; requests sent
// through its seed connection go to that broker, unrouted and not retried
// elsewhere.
func (c *Cluster) directClient(id int) (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.direct[id]; ok {
		return cl, nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.Nodes[id].KafkaAddr),
		kgo.Dialer(c.Net.DialContext),
		kgo.DialTimeout(2*time.Second),
		kgo.RetryTimeout(time.Second),
	)
	if err != nil {
		return nil, err
	}
	c.direct[id] = cl
	return cl, nil
}

// Ask sends req to broker id itself and returns its answer.
func (c *Cluster) Ask(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	cl, err := c.directClient(id)
	if err != nil {
		return nil, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		return nil, fmt.Errorf("the client of node %d has %d seed brokers", id, len(seeds))
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s to node %d: %w", kmsg.NameForKey(req.Key()), id, err)
	}
	return resp, nil
}

// Metadata asks broker id about topics (nil: every topic).
func (c *Cluster) Metadata(ctx context.Context, id int, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := c.Ask(ctx, id, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// answering lists the brokers that run and are not paused.
func (c *Cluster) answering() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Running() && !n.Paused() {
			out = append(out, n)
		}
	}
	return out
}

// firstAnswer returns the first Metadata answer of an answering broker.
func (c *Cluster) firstAnswer(ctx context.Context, topics []string) (*kmsg.MetadataResponse, error) {
	var errs []error
	for _, n := range c.answering() {
		md, err := c.Metadata(ctx, n.ID, topics)
		if err == nil {
			return md, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, errors.New("no broker is running")
	}
	return nil, errors.Join(errs...)
}

// Controller is the node id of the controller group's leader as a broker's
// Metadata names it.
func (c *Cluster) Controller(ctx context.Context) (int, error) {
	md, err := c.firstAnswer(ctx, []string{})
	if err != nil {
		return -1, err
	}
	if md.ControllerID < 0 || int(md.ControllerID) >= len(c.Nodes) {
		return -1, fmt.Errorf("Metadata names controller %d", md.ControllerID)
	}
	return int(md.ControllerID), nil
}

// PartitionLeader is the leader of topic's partition p as a broker's
// Metadata names it.
func (c *Cluster) PartitionLeader(ctx context.Context, topic string, p int32) (int, error) {
	md, err := c.firstAnswer(ctx, []string{topic})
	if err != nil {
		return -1, err
	}
	for _, t := range md.Topics {
		for _, mp := range t.Partitions {
			if mp.Partition == p && mp.ErrorCode == 0 && mp.Leader >= 0 && int(mp.Leader) < len(c.Nodes) {
				return int(mp.Leader), nil
			}
		}
	}
	return -1, fmt.Errorf("Metadata names no leader for %s/%d", topic, p)
}

// healthy checks that every broker runs and answers Metadata listing all
// brokers and one controller, and that every partition of topics (and of
// the group topic, if it exists) has a leader and all its replicas in
// sync.
func (c *Cluster) healthy(ctx context.Context, topics []string) error {
	controller := int32(-2)
	for _, n := range c.Nodes {
		if !n.Running() || n.Paused() {
			return fmt.Errorf("node %d is down or paused", n.ID)
		}
		md, err := c.Metadata(ctx, n.ID, nil)
		if err != nil {
			return err
		}
		if len(md.Brokers) != len(c.Nodes) {
			return fmt.Errorf("node %d lists %d brokers, want %d", n.ID, len(md.Brokers), len(c.Nodes))
		}
		if md.ControllerID < 0 || controller != -2 && md.ControllerID != controller {
			return fmt.Errorf("node %d names controller %d (others: %d)", n.ID, md.ControllerID, controller)
		}
		controller = md.ControllerID
		want := map[string]bool{}
		for _, t := range topics {
			want[t] = true
		}
		for _, t := range md.Topics {
			name := derefStr(t.Topic)
			if name == groupTopic {
				want[name] = true
			}
			if !want[name] {
				continue
			}
			delete(want, name)
			if t.ErrorCode != 0 {
				return fmt.Errorf("node %d: topic %s: %v", n.ID, name, kerr.ErrorForCode(t.ErrorCode))
			}
			for _, p := range t.Partitions {
				switch {
				case p.ErrorCode != 0 && p.ErrorCode != kerr.ReplicaNotAvailable.Code:
					return fmt.Errorf("node %d: %s/%d: %v", n.ID, name, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				case p.Leader < 0:
					return fmt.Errorf("node %d: %s/%d has no leader", n.ID, name, p.Partition)
				case len(p.ISR) != len(p.Replicas):
					return fmt.Errorf("node %d: %s/%d in-sync replicas %v of %v", n.ID, name, p.Partition, p.ISR, p.Replicas)
				}
			}
		}
		if len(want) > 0 {
			return fmt.Errorf("node %d does not know topics %v", n.ID, want)
		}
	}
	return nil
}

// WaitHealthy waits until healthy holds, polling, within timeout.
func (c *Cluster) WaitHealthy(ctx context.Context, topics []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error // the last finding before the deadline cut a check short
	for {
		err := c.healthy(ctx, topics)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			if last != nil {
				err = fmt.Errorf("%w (before that: %v)", err, last)
			}
			return fmt.Errorf("cluster not healthy within %v: %w", timeout, err)
		}
		last = err
		sleepCtx(ctx, 250*time.Millisecond)
	}
}

// CreateTopic creates topic through broker 0 (which forwards to the
// controller) and waits until it is healthy everywhere.
func (c *Cluster) CreateTopic(ctx context.Context, topic string, partitions int32, rf int16) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, rf
	req.Topics = append(req.Topics, rt)
	cl, err := c.directClient(0)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		return fmt.Errorf("CreateTopics %s: %w", topic, err)
	}
	cr := resp.(*kmsg.CreateTopicsResponse)
	if len(cr.Topics) != 1 {
		return fmt.Errorf("CreateTopics %s: %d topics in the response", topic, len(cr.Topics))
	}
	if code := cr.Topics[0].ErrorCode; code != 0 {
		return fmt.Errorf("CreateTopics %s: %v: %s", topic, kerr.ErrorForCode(code), derefStr(cr.Topics[0].ErrorMessage))
	}
	return c.WaitHealthy(ctx, []string{topic}, readyTimeout)
}

// StopAll stops every broker (in parallel) and closes the direct clients.
func (c *Cluster) StopAll() {
	c.mu.Lock()
	for id, cl := range c.direct {
		cl.Close()
		delete(c.direct, id)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(func() {
			if err := n.Stop(); err != nil {
				c.logf("stopping node %d: %v", n.ID, err)
			}
		})
	}
	wg.Wait()
}

// LogTails returns the end of every broker's log, for a failed run.
func (c *Cluster) LogTails(limit int64) string {
	var b strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "--- node %d log (%s), last %d KiB ---\n%s\n", n.ID, n.LogPath, limit>>10, n.LogTail(limit))
	}
	return b.String()
}

// KeepLogs copies every broker's log into dir (for a run whose data the
// test removes), returning the paths written.
func (c *Cluster) KeepLogs(dir string) ([]string, error) {
	var paths []string
	for _, n := range c.Nodes {
		data, err := os.ReadFile(n.LogPath)
		if err != nil {
			return paths, err
		}
		p := fmt.Sprintf("%s/weir-node%d.log", dir, n.ID)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
