package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Helpers for the replication tests (replication_test.go): topics with a
// replication factor, leaders of replicated partitions as every broker's
// Metadata shows them, a sequence-numbered idempotent producer that records
// which records were acknowledged, and the partition logs on disk (segment
// files read, compared across replicas and decoded batch by batch).

const (
	// leaderTimeout bounds waiting for a partition group to elect a leader
	// and for the leader to appear in Metadata (hashicorp/raft election
	// plus the controller report).
	leaderTimeout = 20 * time.Second
	// convergeTimeout bounds waiting for every replica's log to hold what
	// the leader's holds.
	convergeTimeout = 60 * time.Second
)

// replClientOpts are kgo options that ride through a leader failover
// quickly: metadata may be refreshed every 100 ms, retries back off
// briefly, and a request to a broker that stopped answering (SIGSTOP) is
// given up after a few seconds rather than the default 20 s.
func replClientOpts(bs []*Broker) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(kafkaAddrs(bs)...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RetryTimeout(30 * time.Second),
		kgo.ProduceRequestTimeout(3 * time.Second),
		kgo.RequestTimeoutOverhead(3 * time.Second),
		kgo.DialTimeout(2 * time.Second),
	}
}

// kadmClient is a kadm client over a kgo client seeded with bs, closed at
// cleanup.
func kadmClient(t testing.TB, bs []*Broker) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(replClientOpts(bs)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// startReplCluster is StartCluster, with the brokers' logs kept until
// StartCluster's cleanup has dumped them. t.TempDir registers the removal of
// all of a test's temporary directories when it is first called, and
// cleanups run last-registered first: StartCluster registers its cleanup
// (stop the brokers, dump their logs if the test failed) before its first
// t.TempDir call, so the logs would be gone by the time it dumps them.
// Calling t.TempDir once before StartCluster orders the removal after it.
func startReplCluster(t *testing.T, n int, opts ...BrokerOption) []*Broker {
	t.Helper()
	t.TempDir()
	return StartCluster(t, n, opts...)
}

// createReplicatedTopic sends CreateTopics for one topic with replication
// factor rf to broker b (which forwards it to the controller if need be)
// and fails the test unless b answers success.
func createReplicatedTopic(t testing.TB, b *Broker, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = name
	rt.NumPartitions = partitions
	rt.ReplicationFactor = rf
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	cl := directClient(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("CreateTopics %s (%d partitions, RF %d) to node %d: %v", name, partitions, rf, b.NodeID, err)
	}
	cr := resp.(*kmsg.CreateTopicsResponse)
	if len(cr.Topics) != 1 || cr.Topics[0].Topic != name {
		t.Fatalf("CreateTopics %s to node %d: response topics %+v", name, b.NodeID, cr.Topics)
	}
	if r := cr.Topics[0]; r.ErrorCode != 0 {
		t.Fatalf("CreateTopics %s (RF %d) to node %d: error %d (%s) %q", name, rf, b.NodeID, r.ErrorCode, errName(r.ErrorCode), derefStr(r.ErrorMessage))
	}
}

// replPartition is one partition as a broker's Metadata describes it.
type replPartition struct {
	Leader   int32
	Epoch    int32
	Replicas []int32
}

func (p replPartition) String() string {
	return fmt.Sprintf("leader %d epoch %d replicas %v", p.Leader, p.Epoch, p.Replicas)
}

// replicatedLeaders asks b for Metadata of topic and checks: n partitions
// 0..n-1 without errors, rf distinct replicas each, the leader one of the
// replicas and a live broker listed in the same response. It returns
// partition -> description, and the topic id.
func replicatedLeaders(t testing.TB, b *Broker, topic string, n int32, rf int, live []*Broker) (map[int32]replPartition, [16]byte, error) {
	t.Helper()
	var id [16]byte
	md, who, err := topicMetadata(t, b, topic)
	if err != nil {
		return nil, id, err
	}
	mt := md.Topics[0]
	if int32(len(mt.Partitions)) != n {
		return nil, id, fmt.Errorf("%s: %d partitions, want %d", who, len(mt.Partitions), n)
	}
	alive := map[int32]bool{}
	for _, lb := range live {
		alive[int32(lb.NodeID)] = true
	}
	listed := map[int32]bool{}
	for _, mb := range md.Brokers {
		listed[mb.NodeID] = true
	}
	out := map[int32]replPartition{}
	for _, p := range mt.Partitions {
		reps := slices.Clone(p.Replicas)
		slices.Sort(reps)
		switch {
		case p.ErrorCode != 0:
			return nil, id, fmt.Errorf("%s: partition %d error %d (%s), leader %d", who, p.Partition, p.ErrorCode, errName(p.ErrorCode), p.Leader)
		case len(reps) != rf || len(slices.Compact(slices.Clone(reps))) != rf:
			return nil, id, fmt.Errorf("%s: partition %d replicas %v, want %d distinct", who, p.Partition, p.Replicas, rf)
		case !slices.Contains(reps, p.Leader):
			return nil, id, fmt.Errorf("%s: partition %d leader %d is not one of its replicas %v", who, p.Partition, p.Leader, p.Replicas)
		case !alive[p.Leader]:
			return nil, id, fmt.Errorf("%s: partition %d leader %d is not a live broker", who, p.Partition, p.Leader)
		case !listed[p.Leader]:
			return nil, id, fmt.Errorf("%s: partition %d leader %d is not among the brokers in the same response", who, p.Partition, p.Leader)
		}
		out[p.Partition] = replPartition{Leader: p.Leader, Epoch: p.LeaderEpoch, Replicas: reps}
	}
	if len(out) != int(n) {
		return nil, id, fmt.Errorf("%s: partitions %v, want 0..%d", who, sortedIDs(out), n-1)
	}
	return out, mt.TopicID, nil
}

// waitReplicatedLeaders waits until the Metadata of every broker in on
// shows topic as replicatedLeaders checks it, all of them naming the same
// leader and epoch for each partition, and accept (if not nil) approves;
// it returns partition -> description.
func waitReplicatedLeaders(t testing.TB, on, live []*Broker, topic string, n int32, rf int, timeout time.Duration, accept func(map[int32]replPartition) error) map[int32]replPartition {
	t.Helper()
	ids := make([]int, len(on))
	for i, b := range on {
		ids[i] = b.NodeID
	}
	var out map[int32]replPartition
	pollUntil(t, timeout, fmt.Sprintf("topic %s (%d partitions, RF %d) led by live brokers, agreed by nodes %v", topic, n, rf, ids), func() error {
		var first map[int32]replPartition
		for _, b := range on {
			ps, _, err := replicatedLeaders(t, b, topic, n, rf, live)
			if err != nil {
				return err
			}
			if first == nil {
				first = ps
				continue
			}
			for p, d := range first {
				if ps[p].Leader != d.Leader || ps[p].Epoch != d.Epoch {
					return fmt.Errorf("partition %s/%d: %v from node %d, %v from node %d", topic, p, d, on[0].NodeID, ps[p], b.NodeID)
				}
			}
		}
		if accept != nil {
			if err := accept(first); err != nil {
				return err
			}
		}
		out = first
		return nil
	})
	return out
}

// brokerByID returns the broker with node id id.
func brokerByID(t testing.TB, bs []*Broker, id int32) *Broker {
	t.Helper()
	for _, b := range bs {
		if int32(b.NodeID) == id {
			return b
		}
	}
	t.Fatalf("no broker with node id %d", id)
	return nil
}

// ---------------------------------------------------------------------------
// Starting and stopping brokers.

// stopAll stops every broker at once (SIGTERM to all, then waits): no
// broker outlives the others long enough to lead a group on its own or
// lose one. Each must exit with status 0 within stopTimeout.
func stopAll(t testing.TB, bs []*Broker) {
	t.Helper()
	for _, b := range bs {
		if b.exited() {
			t.Fatalf("stopAll: node %d is not running (%s)", b.NodeID, first(b.exitState()))
		}
	}
	for _, b := range bs {
		b.signal(syscall.SIGTERM)
	}
	var errs []string
	for _, b := range bs {
		if !b.waitExit(stopTimeout) {
			b.signal(syscall.SIGKILL)
			b.waitExit(killTimeout)
			errs = append(errs, fmt.Sprintf("node %d did not exit within %v of SIGTERM (killed); log %s\n%s", b.NodeID, stopTimeout, b.LogPath(), b.logTail(16<<10)))
			continue
		}
		if st, code := b.exitState(); code != 0 {
			errs = append(errs, fmt.Sprintf("node %d exited with %s after SIGTERM, want status 0; log %s\n%s", b.NodeID, st, b.LogPath(), b.logTail(16<<10)))
		}
	}
	if len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
}

// startWiped starts a stopped broker whose data directory was removed
// again, with the same node id and ports. The controller refuses its new
// incarnation (DUPLICATE_BROKER_REGISTRATION) while it still counts the
// old registration as live, and the broker retries until that expires,
// so one start must become ready within timeout.
func startWiped(t testing.TB, b *Broker, timeout time.Duration) {
	t.Helper()
	if err := b.launch(); err != nil {
		t.Fatalf("starting node %d: %v", b.NodeID, err)
	}
	if err := b.waitReady(timeout); err != nil {
		if !b.exited() {
			b.forceStop(t)
		}
		t.Fatalf("node %d with a wiped data directory did not become ready: %v\n--- log %s ---\n%s", b.NodeID, err, b.LogPath(), b.logTail(logTailBytes))
	}
}

// ---------------------------------------------------------------------------
// A sequence-numbered idempotent producer.

// seqProducer produces, to every partition of a topic, records with key
// "k<partition>" and value the decimal sequence number within the
// partition (0, 1, 2, ...), and records which were acknowledged.
type seqProducer struct {
	t          testing.TB
	cl         *kgo.Client
	topic      string
	partitions int32

	// pad, if > 0, adds a header of pad bytes to every record, to make
	// batches (and the Raft entries carrying them) larger.
	pad []byte

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	next     []int          // next sequence per partition
	acked    []map[int]bool // per partition
	nAcked   int
	nFailed  int
	firstErr error

	stop chan struct{}
	done chan struct{}
}

// newSeqProducer makes an idempotent producer (kgo's default: acks=all,
// idempotence on, unlimited retries) seeded with bs.
func newSeqProducer(t testing.TB, bs []*Broker, topic string, partitions int32, opts ...kgo.Opt) *seqProducer {
	t.Helper()
	all := append(replClientOpts(bs),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
	)
	all = append(all, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	p := &seqProducer{
		t: t, cl: cl, topic: topic, partitions: partitions,
		next: make([]int, partitions), acked: make([]map[int]bool, partitions),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for i := range p.acked {
		p.acked[i] = map[int]bool{}
	}
	// Every produce and the final flush are bounded by this context.
	p.ctx, p.cancel = context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(func() {
		p.cancel()
		cl.Close()
	})
	return p
}

// padRecords makes every following record carry a header of n bytes.
func (p *seqProducer) padRecords(n int) { p.pad = bytes.Repeat([]byte{'x'}, n) }

// record is the next record of partition part and its sequence number.
func (p *seqProducer) record(part int32) (*kgo.Record, int) {
	p.mu.Lock()
	seq := p.next[part]
	p.next[part]++
	p.mu.Unlock()
	r := &kgo.Record{
		Topic: p.topic, Partition: part,
		Key:   fmt.Appendf(nil, "k%d", part),
		Value: strconv.AppendInt(nil, int64(seq), 10),
	}
	if len(p.pad) > 0 {
		r.Headers = []kgo.RecordHeader{{Key: "pad", Value: p.pad}}
	}
	return r, seq
}

// produce1 produces the next record of partition part asynchronously.
func (p *seqProducer) produce1(part int32) {
	r, seq := p.record(part)
	p.cl.Produce(p.ctx, r, func(r *kgo.Record, err error) { p.result(part, seq, err) })
}

func (p *seqProducer) result(part int32, seq int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.nFailed++
		if p.firstErr == nil {
			p.firstErr = fmt.Errorf("%s/%d seq %d: %w", p.topic, part, seq, err)
		}
		return
	}
	p.acked[part][seq] = true
	p.nAcked++
}

// produceSync produces the next record of every partition and waits for
// each to be acknowledged (one batch per record): it fails the test on an
// error.
func (p *seqProducer) produceSync(n int) {
	p.t.Helper()
	for range n {
		for part := range p.partitions {
			r, seq := p.record(part)
			ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
			err := p.cl.ProduceSync(ctx, r).FirstErr()
			cancel()
			p.result(part, seq, err)
			if err != nil {
				p.t.Fatalf("producing %s/%d seq %d: %v", p.topic, part, seq, err)
			}
		}
	}
}

// run produces burst records per partition every pause in the background
// until stopAndFlush, at most maxPerPartition per partition.
func (p *seqProducer) run(burst int, pause time.Duration, maxPerPartition int) {
	go func() {
		defer close(p.done)
		for round := 0; round*burst < maxPerPartition; round++ {
			select {
			case <-p.stop:
				return
			case <-p.ctx.Done():
				return
			default:
			}
			for range burst {
				for part := range p.partitions {
					p.produce1(part)
				}
			}
			time.Sleep(pause)
		}
	}()
}

// stopAndFlush stops run and waits (≤ timeout) until every record produced
// has its result. It returns the flush error.
func (p *seqProducer) stopAndFlush(timeout time.Duration) error {
	close(p.stop)
	select {
	case <-p.done:
	case <-time.After(timeout):
		return errors.New("the produce loop did not stop")
	}
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	return p.cl.Flush(ctx)
}

// ackedCount is the number of acknowledged records so far.
func (p *seqProducer) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nAcked
}

// ackedIn is the number of acknowledged records of partition part so far.
func (p *seqProducer) ackedIn(part int32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked[part])
}

// waitAckedIn waits until at least n records of partition part were
// acknowledged.
func (p *seqProducer) waitAckedIn(t testing.TB, part int32, n int, timeout time.Duration, what string) {
	t.Helper()
	pollUntil(t, timeout, what, func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.acked[part]) >= n {
			return nil
		}
		return fmt.Errorf("%d acknowledged in partition %d (want ≥ %d), %d failed in all, first error %v", len(p.acked[part]), part, n, p.nFailed, p.firstErr)
	})
}

// waitAcked waits until at least n records were acknowledged.
func (p *seqProducer) waitAcked(t testing.TB, n int, timeout time.Duration, what string) {
	t.Helper()
	pollUntil(t, timeout, what, func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.nAcked >= n {
			return nil
		}
		return fmt.Errorf("%d acknowledged (want ≥ %d), %d failed, first error %v", p.nAcked, n, p.nFailed, p.firstErr)
	})
}

func (p *seqProducer) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("produced %v per partition, %d acknowledged, %d failed (first error: %v)", p.next, p.nAcked, p.nFailed, p.firstErr)
}
