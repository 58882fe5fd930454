package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
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
	md, err := askMetadata(t, b, topic)
	if err != nil {
		return nil, id, err
	}
	who := fmt.Sprintf("Metadata(%s) from node %d", topic, b.NodeID)
	if len(md.Topics) != 1 || derefStr(md.Topics[0].Topic) != topic {
		return nil, id, fmt.Errorf("%s: %d topics in the response", who, len(md.Topics))
	}
	mt := md.Topics[0]
	if mt.ErrorCode != 0 {
		return nil, id, fmt.Errorf("%s: topic error %d (%s)", who, mt.ErrorCode, errName(mt.ErrorCode))
	}
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
// again, with the same node id and ports. Its new incarnation is refused
// (DUPLICATE_BROKER_REGISTRATION) while the controller still counts its
// old registration as live, so a refused start is retried until timeout.
func startWiped(t testing.TB, b *Broker, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for attempt := 1; ; attempt++ {
		if err := b.launch(); err != nil {
			t.Fatalf("starting node %d: %v", b.NodeID, err)
		}
		err := b.waitReady(min(readyTimeout, time.Until(deadline)+time.Second))
		if err == nil {
			t.Logf("node %d with a wiped data directory ready after %d start(s)", b.NodeID, attempt)
			return
		}
		refused := b.exited() && strings.Contains(b.logTail(8<<10), "DUPLICATE_BROKER_REGISTRATION")
		if !b.exited() {
			b.forceStop(t)
		}
		if !refused || time.Now().After(deadline) {
			t.Fatalf("node %d with a wiped data directory did not become ready (attempt %d): %v\n--- log %s ---\n%s", b.NodeID, attempt, err, b.LogPath(), b.logTail(logTailBytes))
		}
		time.Sleep(time.Second)
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

// ---------------------------------------------------------------------------
// Checking a partition's records against what was acknowledged.

// logRecord is one record of a partition log.
type logRecord struct {
	Offset     int64
	Key, Value []byte
}

// seqStats counts how a partition's records compare with the acknowledged
// sequence numbers.
type seqStats struct {
	acked, found, lost, duplicated, outOfOrder, unacked, badKeys int
}

func (s seqStats) String() string {
	return fmt.Sprintf("acknowledged %d, found %d, lost %d, duplicated %d, out of order %d, present but unacknowledged %d, bad keys/values %d",
		s.acked, s.found, s.lost, s.duplicated, s.outOfOrder, s.unacked, s.badKeys)
}

// checkSeqLog compares the records of partition part (in offset order)
// with the acknowledged sequence numbers: every acknowledged record must be
// there exactly once, and sequence numbers must ascend with offsets (one
// producer). It logs the counts and reports failures with t.Errorf.
func checkSeqLog(t testing.TB, what string, part int32, recs []logRecord, acked map[int]bool) seqStats {
	t.Helper()
	var st seqStats
	st.acked = len(acked)
	seen := map[int]int{}
	prevSeq, prevOff := -1, int64(-1)
	var problems []string
	note := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	wantKey := fmt.Sprintf("k%d", part)
	for _, r := range recs {
		if r.Offset <= prevOff {
			st.outOfOrder++
			note("offset %d after offset %d", r.Offset, prevOff)
		}
		prevOff = r.Offset
		seq, err := strconv.Atoi(string(r.Value))
		if err != nil || string(r.Key) != wantKey {
			st.badKeys++
			note("offset %d: key %q value %q, want key %q and a decimal sequence", r.Offset, r.Key, r.Value, wantKey)
			continue
		}
		seen[seq]++
		if seen[seq] == 2 {
			st.duplicated++
			note("sequence %d again at offset %d", seq, r.Offset)
		} else if seen[seq] == 1 && !acked[seq] {
			st.unacked++
		}
		if seq <= prevSeq {
			st.outOfOrder++
			note("sequence %d at offset %d after sequence %d", seq, r.Offset, prevSeq)
		}
		prevSeq = seq
	}
	for seq := range acked {
		if seen[seq] > 0 {
			st.found++
		} else {
			st.lost++
			if st.lost <= 5 {
				note("acknowledged sequence %d is missing", seq)
			}
		}
	}
	t.Logf("%s, partition %d: %d records, %v", what, part, len(recs), st)
	if st.lost > 0 || st.duplicated > 0 || st.outOfOrder > 0 || st.badKeys > 0 {
		t.Errorf("%s, partition %d: %v; first problems:\n  %s", what, part, st, strings.Join(problems, "\n  "))
	}
	return st
}

// consumeAll reads partitions 0..n-1 of topic from the start up to their
// high watermarks (from ListOffsets through bs), through whichever
// brokers lead them now, with a fresh client.
func consumeAll(t testing.TB, bs []*Broker, topic string, n int32, timeout time.Duration) map[int32][]logRecord {
	t.Helper()
	adm := kadmClient(t, bs)
	ends := endOffsets(t, adm, topic)
	offsets := map[int32]kgo.Offset{}
	for p := range n {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	opts := append(replClientOpts(bs),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(300*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	out := map[int32][]logRecord{}
	last := map[int32]int64{}
	for p := range n {
		last[p] = -1
	}
	doneAll := func() bool {
		for p := range n {
			if last[p] < ends[p]-1 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(timeout)
	var errs []error
	for !doneAll() && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && len(errs) < 10 {
				errs = append(errs, fmt.Errorf("%s/%d: %w", tp, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], logRecord{Offset: r.Offset, Key: r.Key, Value: r.Value})
			last[r.Partition] = r.Offset
		})
	}
	if !doneAll() {
		t.Fatalf("consuming %s: reached offsets %v of high watermarks %v within %v; fetch errors %v", topic, last, ends, timeout, errs)
	}
	t.Logf("consumed %s up to the high watermarks %v", topic, ends)
	return out
}

// ---------------------------------------------------------------------------
// Partition logs on disk.

// partitionDirOf is <data dir>/topics/<topic>-<topic id>/<partition>.
func partitionDirOf(b *Broker, topic string, id [16]byte, partition int32) string {
	return filepath.Join(b.DataDir, "topics", topic+"-"+base64.RawURLEncoding.EncodeToString(id[:]), strconv.Itoa(int(partition)))
}

// readSegments returns file name -> contents of the *.log segment files in
// dir.
func readSegments(dir string) (map[string][]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, path := range names {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out[filepath.Base(path)] = data
	}
	return out, nil
}

// segmentsSize is the total size of the *.log files in dir and how many
// there are.
func segmentsSize(dir string) (int64, int, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return 0, 0, err
	}
	var total int64
	for _, path := range names {
		st, err := os.Stat(path)
		if err != nil {
			return 0, 0, err
		}
		total += st.Size()
	}
	return total, len(names), nil
}

// waitLogsConverge waits until, for every partition, the *.log files of
// every broker in bs have the same total size, at least minBytes, unchanged
// over three polls 300 ms apart (the replicas applied the same committed
// entries and nothing is arriving).
func waitLogsConverge(t testing.TB, bs []*Broker, topic string, id [16]byte, n int32, minBytes int64, timeout time.Duration) {
	t.Helper()
	var prev string
	stable := 0
	deadline := time.Now().Add(timeout)
	for {
		var desc strings.Builder
		equal := true
		for p := range n {
			var first int64 = -1
			for _, b := range bs {
				size, files, err := segmentsSize(partitionDirOf(b, topic, id, p))
				if err != nil {
					size, files = -1, 0
				}
				fmt.Fprintf(&desc, "p%d@node%d=%dB/%df ", p, b.NodeID, size, files)
				if first == -1 {
					first = size
				}
				if size != first || size < minBytes {
					equal = false
				}
			}
		}
		cur := desc.String()
		if equal && cur == prev {
			stable++
		} else {
			stable = 0
		}
		prev = cur
		if stable >= 2 {
			t.Logf("replica logs converged: %s", cur)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica logs of %s did not converge within %v: %s", topic, timeout, cur)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// compareReplicaSegments compares, for every partition, the set of *.log
// segment files and their bytes across the (stopped) brokers in bs, and
// returns partition -> the segments of the first broker.
func compareReplicaSegments(t testing.TB, bs []*Broker, topic string, id [16]byte, n int32) map[int32]map[string][]byte {
	t.Helper()
	out := map[int32]map[string][]byte{}
	for p := range n {
		ref := bs[0]
		want, err := readSegments(partitionDirOf(ref, topic, id, p))
		if err != nil {
			t.Fatalf("reading node %d's segments of %s/%d: %v", ref.NodeID, topic, p, err)
		}
		if len(want) == 0 {
			t.Fatalf("node %d has no segment files for %s/%d in %s", ref.NodeID, topic, p, partitionDirOf(ref, topic, id, p))
		}
		out[p] = want
		var total int
		for _, d := range want {
			total += len(d)
		}
		for _, b := range bs[1:] {
			got, err := readSegments(partitionDirOf(b, topic, id, p))
			if err != nil {
				t.Fatalf("reading node %d's segments of %s/%d: %v", b.NodeID, topic, p, err)
			}
			wantNames := sortedKeys(want)
			gotNames := sortedKeys(got)
			if !slices.Equal(wantNames, gotNames) {
				t.Errorf("%s/%d: node %d has segment files %v, node %d has %v", topic, p, ref.NodeID, segDesc(want), b.NodeID, segDesc(got))
				continue
			}
			for _, name := range wantNames {
				if !bytes.Equal(want[name], got[name]) {
					t.Errorf("%s/%d segment %s: node %d's %d bytes and node %d's %d bytes differ first at byte %d",
						topic, p, name, ref.NodeID, len(want[name]), b.NodeID, len(got[name]), firstDiff(want[name], got[name]))
				}
			}
		}
		t.Logf("%s/%d: %d segment file(s), %d bytes on node %d, compared with nodes %v", topic, p, len(want), total, ref.NodeID, nodeIDs(bs[1:]))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func segDesc(m map[string][]byte) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s(%dB)", k, len(m[k])))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func nodeIDs(bs []*Broker) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = b.NodeID
	}
	return out
}

// decodeSegments decodes the record batches of a partition's segment
// files (in base offset order, which the zero-padded names sort by),
// checking each batch's CRC, and returns the data records (control batches
// are skipped).
func decodeSegments(t testing.TB, what string, segs map[string][]byte) []logRecord {
	t.Helper()
	var out []logRecord
	for _, name := range sortedKeys(segs) {
		data := segs[name]
		for pos := 0; pos < len(data); {
			if len(data)-pos < 12 {
				t.Fatalf("%s %s: %d stray bytes at position %d", what, name, len(data)-pos, pos)
			}
			size := 12 + int(int32(binary.BigEndian.Uint32(data[pos+8:])))
			if size < 61 || pos+size > len(data) {
				t.Fatalf("%s %s: batch at position %d claims %d bytes, %d left", what, name, pos, size, len(data)-pos)
			}
			raw := data[pos : pos+size]
			var batch kmsg.RecordBatch
			if err := batch.ReadFrom(raw); err != nil {
				t.Fatalf("%s %s: batch at position %d: %v", what, name, pos, err)
			}
			if crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); int32(crc) != batch.CRC {
				t.Fatalf("%s %s: batch at position %d (offset %d): CRC %08x, computed %08x", what, name, pos, batch.FirstOffset, uint32(batch.CRC), crc)
			}
			pos += size
			if batch.Attributes&0x20 != 0 { // control batch
				continue
			}
			if c := batch.Attributes & 0x07; c != 0 {
				t.Fatalf("%s %s: batch at offset %d is compressed (codec %d); the tests produce uncompressed", what, name, batch.FirstOffset, c)
			}
			recs := batch.Records
			for i := range batch.NumRecords {
				l, n := binary.Varint(recs)
				if n <= 0 || int(l) < 0 || n+int(l) > len(recs) {
					t.Fatalf("%s %s: batch at offset %d: record %d does not fit", what, name, batch.FirstOffset, i)
				}
				var r kmsg.Record
				if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
					t.Fatalf("%s %s: batch at offset %d: record %d: %v", what, name, batch.FirstOffset, i, err)
				}
				recs = recs[n+int(l):]
				out = append(out, logRecord{Offset: batch.FirstOffset + int64(r.OffsetDelta), Key: r.Key, Value: r.Value})
			}
			if len(recs) != 0 {
				t.Fatalf("%s %s: batch at offset %d: %d bytes after its %d records", what, name, batch.FirstOffset, len(recs), batch.NumRecords)
			}
		}
	}
	return out
}

// sameRecords reports the first difference between two record lists.
func sameRecords(a, b []logRecord) error {
	for i := range min(len(a), len(b)) {
		if a[i].Offset != b[i].Offset || !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) {
			return fmt.Errorf("record %d: offset %d %q=%q vs offset %d %q=%q", i, a[i].Offset, a[i].Key, a[i].Value, b[i].Offset, b[i].Key, b[i].Value)
		}
	}
	if len(a) != len(b) {
		return fmt.Errorf("%d records vs %d", len(a), len(b))
	}
	return nil
}

// partitionGroupDir is the Raft state of a partition's group on broker b:
// <data dir>/raft/p-<topic id>-<partition> (raft/store.go), whose
// snapshots/ directory is a hashicorp/raft FileSnapshotStore.
func partitionGroupDir(b *Broker, id [16]byte, partition int32) string {
	return filepath.Join(b.DataDir, "raft", "p-"+base64.RawURLEncoding.EncodeToString(id[:])+"-"+strconv.Itoa(int(partition)))
}

// raftSnapshots lists the Raft log indexes of the complete snapshots
// (meta.json written, not a .tmp directory) in a group's snapshot store.
func raftSnapshots(groupDir string) ([]uint64, error) {
	metas, err := filepath.Glob(filepath.Join(groupDir, "snapshots", "*", "meta.json"))
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, path := range metas {
		if strings.HasSuffix(filepath.Dir(path), ".tmp") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var meta struct{ Index uint64 }
		if err := json.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, meta.Index)
	}
	slices.Sort(out)
	return out, nil
}
