package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Multi-broker clusters for the integration tests.
//
// StartCluster reuses the single-broker harness (Broker, launch, waitReady,
// cleanup) but chooses every broker's ports before any of them starts,
// because each broker's --seeds must name the RPC addresses of the others.
// StartBroker picks its own ports inside, so the brokers are assembled here
// rather than through it; harness_test.go is unchanged.

// clusterTimeout bounds starting a cluster: every broker ready and all of
// them agreeing on the membership and the controller.
const clusterTimeout = 30 * time.Second

// StartCluster starts n brokers with node ids 0..n-1 on free loopback ports,
// each with a fresh data directory and --seeds listing the other brokers'
// RPC addresses, and waits (≤30 s in all) until every broker is ready and
// every broker's Metadata lists all n brokers and the same controller.
// opts apply to every broker; the cluster chooses node ids and data
// directories itself, so WithNodeID and WithDataDir are refused. Brokers are
// stopped at cleanup and their logs dumped if the test failed.
func StartCluster(t testing.TB, n int, opts ...BrokerOption) []*Broker {
	t.Helper()
	if n < 1 {
		t.Fatalf("StartCluster: n = %d", n)
	}
	probe := brokerSpec{nodeID: -1 << 20}
	for _, o := range opts {
		o(&probe)
	}
	if probe.dataDir != "" || probe.nodeID != -1<<20 {
		t.Fatalf("StartCluster: WithDataDir and WithNodeID are chosen by the cluster (node ids 0..n-1, fresh data directories)")
	}
	bin := WeirBinary(t)
	// Cleanups run last-registered first: a TempDir made before the
	// cleanup below outlives it, so the logs it prints still exist.
	_ = t.TempDir()

	var (
		mu      sync.Mutex
		running []*Broker // brokers of the current attempt
	)
	t.Cleanup(func() {
		mu.Lock()
		bs := running
		mu.Unlock()
		var wg sync.WaitGroup
		for _, b := range bs {
			wg.Add(1)
			go func() { defer wg.Done(); b.closeRawClient(); b.forceStop(t) }()
		}
		wg.Wait()
		if t.Failed() {
			for _, b := range bs {
				t.Logf("--- weir log (node %d, %s), last %d KiB ---\n%s", b.NodeID, b.logPath, logTailBytes>>10, b.logTail(logTailBytes))
			}
		}
	})

	// Ports are released before the brokers bind them, so another process
	// may grab one in between: on a bind failure start the whole cluster
	// again on new ports (every broker's seeds name the others' ports).
	for attempt := 1; ; attempt++ {
		addrs := freeLoopbackAddrs(t, 3*n)
		bs := make([]*Broker, n)
		for i := range n {
			bs[i] = newClusterBroker(t, bin, i, addrs[3*i], addrs[3*i+1], addrs[3*i+2], opts)
		}
		for i, b := range bs {
			var seeds []string
			for j, o := range bs {
				if j != i {
					seeds = append(seeds, o.RPCAddr)
				}
			}
			if len(seeds) > 0 {
				b.spec.extraArgs = append([]string{"--seeds", strings.Join(seeds, ",")}, b.spec.extraArgs...)
			}
			if len(b.spec.racks) > 0 {
				if len(b.spec.racks) != n {
					t.Fatalf("StartCluster: %d racks for %d brokers", len(b.spec.racks), n)
				}
				b.spec.extraArgs = append(b.spec.extraArgs, "--rack", b.spec.racks[i])
			}
			b.args = b.buildArgs()
		}
		mu.Lock()
		running = bs
		mu.Unlock()

		deadline := time.Now().Add(clusterTimeout)
		for _, b := range bs {
			if err := b.launch(); err != nil {
				t.Fatalf("starting weir node %d: %v", b.NodeID, err)
			}
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, b := range bs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = b.waitReady(time.Until(deadline))
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err == nil {
			waitClusterView(t, bs, time.Until(deadline)+time.Second)
			return bs
		}

		bindFailure := false
		for _, b := range bs {
			if b.exited() && strings.Contains(b.logTail(8<<10), "address already in use") {
				bindFailure = true
			}
		}
		if !bindFailure || attempt == 3 {
			var msg strings.Builder
			for i, err := range errs {
				if err != nil {
					fmt.Fprintf(&msg, "\n  node %d (kafka %s, admin %s, rpc %s): %v", i, bs[i].KafkaAddr, bs[i].AdminAddr, bs[i].RPCAddr, err)
				}
			}
			t.Fatalf("a %d-broker cluster did not become ready within %v:%s\n(broker logs follow)", n, clusterTimeout, msg.String())
		}
		t.Logf("a broker could not bind its ports (attempt %d); restarting the cluster on new ports", attempt)
		var stop sync.WaitGroup
		for _, b := range bs {
			stop.Add(1)
			go func() { defer stop.Done(); b.forceStop(t) }()
		}
		stop.Wait()
	}
}

// newClusterBroker builds (without starting) node id on the given addresses
// with a fresh data directory and log, as StartBroker does.
func newClusterBroker(t testing.TB, bin string, id int, kafkaAddr, adminAddr, rpcAddr string, opts []BrokerOption) *Broker {
	t.Helper()
	spec := brokerSpec{logLevel: os.Getenv("WEIR_TEST_LOG_LEVEL")}
	if spec.logLevel == "" {
		spec.logLevel = "info"
	}
	for _, o := range opts {
		o(&spec)
	}
	spec.nodeID = id
	spec.dataDir = t.TempDir()
	return &Broker{
		KafkaAddr: kafkaAddr,
		AdminAddr: adminAddr,
		RPCAddr:   rpcAddr,
		DataDir:   spec.dataDir,
		NodeID:    id,
		spec:      spec,
		bin:       bin,
		logPath:   filepath.Join(t.TempDir(), "weir-node"+strconv.Itoa(id)+".log"),
	}
}

// kafkaAddrs lists the brokers' Kafka addresses, for kgo.SeedBrokers.
func kafkaAddrs(bs []*Broker) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.KafkaAddr
	}
	return out
}

// without returns bs minus the broker with node id id.
func without(bs []*Broker, id int32) []*Broker {
	var out []*Broker
	for _, b := range bs {
		if int32(b.NodeID) != id {
			out = append(out, b)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Requests to one particular broker.

// directClients holds, per broker, a kgo client seeded with only that broker;
// requests go to its seed connection, so kgo neither routes them (to the
// controller, a coordinator) nor retries them on another broker.
var directClients sync.Map // *Broker -> *kgo.Client

func directClient(t testing.TB, b *Broker) *kgo.Client {
	if cl, ok := directClients.Load(b); ok {
		return cl.(*kgo.Client)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.KafkaAddr), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	if prev, loaded := directClients.LoadOrStore(b, cl); loaded {
		cl.Close()
		return prev.(*kgo.Client)
	}
	t.Cleanup(func() {
		directClients.Delete(b)
		cl.Close()
	})
	return cl
}

// ask sends req to broker b itself (≤5 s) and returns its response or the
// transport error. It does not fail the test: callers poll with it.
func ask(t testing.TB, b *Broker, req kmsg.Request) (kmsg.Response, error) {
	t.Helper()
	cl := directClient(t, b)
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		t.Fatalf("direct client for %s has %d seed brokers", b.KafkaAddr, len(seeds))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return seeds[0].Request(ctx, req)
}

// askMetadata asks broker b for Metadata of topics (none: brokers only).
func askMetadata(t testing.TB, b *Broker, topics ...string) (*kmsg.MetadataResponse, error) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // empty, not null (null is all topics)
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := ask(t, b, req)
	if err != nil {
		return nil, fmt.Errorf("Metadata to node %d (%s): %w", b.NodeID, b.KafkaAddr, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// askDescribeCluster sends DescribeCluster to broker b.
func askDescribeCluster(t testing.TB, b *Broker) (*kmsg.DescribeClusterResponse, error) {
	t.Helper()
	resp, err := ask(t, b, kmsg.NewPtrDescribeClusterRequest())
	if err != nil {
		return nil, fmt.Errorf("DescribeCluster to node %d (%s): %w", b.NodeID, b.KafkaAddr, err)
	}
	return resp.(*kmsg.DescribeClusterResponse), nil
}

// createTopicVia sends CreateTopics for one topic (replication factor 1) to
// broker b itself and fails the test unless that broker answers success.
func createTopicVia(t testing.TB, b *Broker, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = name
	rt.NumPartitions = partitions
	rt.ReplicationFactor = 1
	req.Topics = append(req.Topics, rt)
	resp, err := ask(t, b, req)
	if err != nil {
		t.Fatalf("CreateTopics %s (%d partitions, RF 1) to node %d (%s): %v", name, partitions, b.NodeID, b.KafkaAddr, err)
	}
	cr := resp.(*kmsg.CreateTopicsResponse)
	if len(cr.Topics) != 1 || cr.Topics[0].Topic != name {
		t.Fatalf("CreateTopics %s to node %d: response topics %+v, want exactly %s", name, b.NodeID, cr.Topics, name)
	}
	if r := cr.Topics[0]; r.ErrorCode != 0 {
		t.Fatalf("CreateTopics %s to node %d: error code %d (%s), message %q, want 0", name, b.NodeID, r.ErrorCode, errName(r.ErrorCode), derefStr(r.ErrorMessage))
	}
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return "unknown"
}

// ---------------------------------------------------------------------------
// Waiting for the cluster.

// pollUntil calls check every 100 ms until it returns nil or timeout passes,
// then fails the test with what and check's last error.
func pollUntil(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clusterView checks that Metadata and DescribeCluster from every broker in
// live list exactly the live brokers at their Kafka addresses, one cluster
// id and one controller (≥0, itself live); it returns the controller.
func clusterView(t testing.TB, live []*Broker) (int32, error) {
	t.Helper()
	want := map[int32]string{}
	for _, b := range live {
		want[int32(b.NodeID)] = b.KafkaAddr
	}
	controller, clusterID := int32(-2), ""
	agree := func(who string, id int32, cid string) error {
		if id < 0 {
			return fmt.Errorf("%s: controller %d, want a node id", who, id)
		}
		if _, ok := want[id]; !ok {
			return fmt.Errorf("%s: controller %d is not a live broker (live: %v)", who, id, sortedIDs(want))
		}
		if controller == -2 {
			controller, clusterID = id, cid
			return nil
		}
		if id != controller {
			return fmt.Errorf("%s: controller %d, but node %d said %d", who, id, live[0].NodeID, controller)
		}
		if cid != clusterID {
			return fmt.Errorf("%s: cluster id %q, but node %d said %q", who, cid, live[0].NodeID, clusterID)
		}
		return nil
	}
	sameBrokers := func(who string, got map[int32]string) error {
		for id, addr := range want {
			if got[id] != addr {
				return fmt.Errorf("%s: brokers %v, want %v", who, got, want)
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("%s: brokers %v, want %v", who, got, want)
		}
		return nil
	}
	for _, b := range live {
		md, err := askMetadata(t, b)
		if err != nil {
			return -1, err
		}
		who := fmt.Sprintf("Metadata from node %d", b.NodeID)
		got := map[int32]string{}
		for _, mb := range md.Brokers {
			got[mb.NodeID] = mb.Host + ":" + strconv.Itoa(int(mb.Port))
		}
		if err := sameBrokers(who, got); err != nil {
			return -1, err
		}
		if err := agree(who, md.ControllerID, derefStr(md.ClusterID)); err != nil {
			return -1, err
		}

		dc, err := askDescribeCluster(t, b)
		if err != nil {
			return -1, err
		}
		who = fmt.Sprintf("DescribeCluster from node %d", b.NodeID)
		if dc.ErrorCode != 0 {
			return -1, fmt.Errorf("%s: error code %d (%s) %q", who, dc.ErrorCode, errName(dc.ErrorCode), derefStr(dc.ErrorMessage))
		}
		got = map[int32]string{}
		for _, db := range dc.Brokers {
			got[db.NodeID] = db.Host + ":" + strconv.Itoa(int(db.Port))
		}
		if err := sameBrokers(who, got); err != nil {
			return -1, err
		}
		if err := agree(who, dc.ControllerID, dc.ClusterID); err != nil {
			return -1, err
		}
	}
	if clusterID == "" {
		return -1, errors.New("empty cluster id")
	}
	return controller, nil
}

// waitClusterView waits until clusterView holds for live and returns the
// controller.
func waitClusterView(t testing.TB, live []*Broker, timeout time.Duration) int32 {
	t.Helper()
	var controller int32
	ids := make([]int, len(live))
	for i, b := range live {
		ids[i] = b.NodeID
	}
	pollUntil(t, timeout, fmt.Sprintf("nodes %v agreeing on brokers %v and one controller", ids, ids), func() error {
		c, err := clusterView(t, live)
		controller = c
		return err
	})
	return controller
}

func sortedIDs[V any](m map[int32]V) []int32 {
	ids := make([]int32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// topicMetadata asks b for Metadata of topic, refusing a response whose
// one topic is not it or has a topic error; who names the request for
// error messages.
func topicMetadata(t testing.TB, b *Broker, topic string) (md *kmsg.MetadataResponse, who string, err error) {
	t.Helper()
	md, err = askMetadata(t, b, topic)
	if err != nil {
		return nil, "", err
	}
	who = fmt.Sprintf("Metadata(%s) from node %d", topic, b.NodeID)
	if len(md.Topics) != 1 || derefStr(md.Topics[0].Topic) != topic {
		return nil, who, fmt.Errorf("%s: %d topics in the response", who, len(md.Topics))
	}
	if code := md.Topics[0].ErrorCode; code != 0 {
		return nil, who, fmt.Errorf("%s: topic error %d (%s)", who, code, errName(code))
	}
	return md, who, nil
}

// partitionLeaders checks Metadata for topic from broker b: n partitions
// 0..n-1, no errors, one replica each, the leader that replica and a live
// broker. It returns partition -> leader.
func partitionLeaders(t testing.TB, b *Broker, topic string, n int32, live []*Broker) (map[int32]int32, error) {
	t.Helper()
	md, who, err := topicMetadata(t, b, topic)
	if err != nil {
		return nil, err
	}
	mt := md.Topics[0]
	if int32(len(mt.Partitions)) != n {
		return nil, fmt.Errorf("%s: %d partitions, want %d", who, len(mt.Partitions), n)
	}
	alive := map[int32]bool{}
	for _, lb := range live {
		alive[int32(lb.NodeID)] = true
	}
	listed := map[int32]bool{}
	for _, mb := range md.Brokers {
		listed[mb.NodeID] = true
	}
	leaders := map[int32]int32{}
	for _, p := range mt.Partitions {
		switch {
		case p.ErrorCode != 0:
			return nil, fmt.Errorf("%s: partition %d error %d (%s)", who, p.Partition, p.ErrorCode, errName(p.ErrorCode))
		case len(p.Replicas) != 1:
			return nil, fmt.Errorf("%s: partition %d replicas %v, want one (RF 1)", who, p.Partition, p.Replicas)
		case p.Leader != p.Replicas[0]:
			return nil, fmt.Errorf("%s: partition %d leader %d, want its replica %d", who, p.Partition, p.Leader, p.Replicas[0])
		case !alive[p.Leader]:
			return nil, fmt.Errorf("%s: partition %d leader %d is not a live broker", who, p.Partition, p.Leader)
		case !listed[p.Leader]:
			return nil, fmt.Errorf("%s: partition %d leader %d is not among the brokers in the same response", who, p.Partition, p.Leader)
		}
		leaders[p.Partition] = p.Leader
	}
	if len(leaders) != int(n) {
		return nil, fmt.Errorf("%s: partitions %v, want 0..%d", who, sortedIDs(leaders), n-1)
	}
	return leaders, nil
}

// waitTopicEverywhere waits until every live broker's Metadata shows topic
// with n partitions led by live brokers, the same leaders on all of them,
// and returns partition -> leader.
func waitTopicEverywhere(t testing.TB, live []*Broker, topic string, n int32, timeout time.Duration) map[int32]int32 {
	t.Helper()
	return waitTopicOn(t, live, live, topic, n, timeout)
}

// waitTopicOn is waitTopicEverywhere asking only the brokers in on.
func waitTopicOn(t testing.TB, on, live []*Broker, topic string, n int32, timeout time.Duration) map[int32]int32 {
	t.Helper()
	ids := make([]int, len(on))
	for i, b := range on {
		ids[i] = b.NodeID
	}
	var leaders map[int32]int32
	pollUntil(t, timeout, fmt.Sprintf("topic %s with %d partitions led by live brokers in Metadata of nodes %v", topic, n, ids), func() error {
		var first map[int32]int32
		for _, b := range on {
			l, err := partitionLeaders(t, b, topic, n, live)
			if err != nil {
				return err
			}
			if first == nil {
				first = l
				continue
			}
			for p, id := range first {
				if l[p] != id {
					return fmt.Errorf("partition %s/%d: leader %d from node %d, %d from node %d", topic, p, id, on[0].NodeID, l[p], b.NodeID)
				}
			}
		}
		leaders = first
		return nil
	})
	return leaders
}
