package kafka

import (
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/memory"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
)

// Produce requests sent back to back on one connection are pipelined,
// and the requests of other APIs between them still see every produce
// before them applied: a ListOffsets after two produces and a Fetch after
// a third, all sent before any answer is read, are answered in order and
// see all of it.
func TestPipelinedProduceWithOtherAPIs(t *testing.T) {
	_, b, addr := startServer(t)
	tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: "mixed", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	p1 := produceRequest(9, -1, "mixed", logtest.Batch{Records: 3}.Encode())
	p2 := produceRequest(9, -1, "mixed", logtest.Batch{Records: 2}.Encode())
	lo := latestOffsetRequest("mixed")
	p3 := produceRequest(9, 1, "mixed", logtest.Batch{Records: 4}.Encode())
	fetch := fetchRequest(12, "mixed", tp.ID(), 0, 1<<20)
	var corr []int32
	for _, req := range []kmsg.Request{p1, p2, lo, p3, fetch} {
		corr = append(corr, c.send(req))
	}
	for i, want := range []int64{0, 3} {
		req := []kmsg.Request{p1, p2}[i]
		if got := producedAt(t, c.read(req, corr[i])); got != want {
			t.Fatalf("produce %d at offset %d, want %d", i+1, got, want)
		}
	}
	lr := c.read(lo, corr[2]).(*kmsg.ListOffsetsResponse)
	if got := lr.Topics[0].Partitions[0].Offset; got != 5 {
		t.Fatalf("ListOffsets after two produces: %d, want 5", got)
	}
	if got := producedAt(t, c.read(p3, corr[3])); got != 5 {
		t.Fatalf("third produce at offset %d, want 5", got)
	}
	fr := c.read(fetch, corr[4]).(*kmsg.FetchResponse)
	if fp := fr.Topics[0].Partitions[0]; fp.ErrorCode != 0 || fp.HighWatermark != 9 || len(fp.RecordBatches) == 0 {
		t.Fatalf("Fetch after three produces: error %d, high watermark %d, %d bytes; want 9 and records", fp.ErrorCode, fp.HighWatermark, len(fp.RecordBatches))
	}
}

// Five pipelined idempotent requests of which the third is refused when
// it is read (a corrupt batch): the first two are written, the third gets
// CORRUPT_MESSAGE and the two after it OUT_OF_ORDER_SEQUENCE_NUMBER, as
// Kafka answers each in turn. Retried in order they land once each.
func TestPipelinedIdempotentBatchRefusedMidStream(t *testing.T) {
	_, b, addr := startServer(t)
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "idem", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := b.InitProducerID()
	if err != nil {
		t.Fatal(err)
	}
	batches := idempotentRun(pid, epoch, 5, 3)
	corrupt := append([]byte(nil), batches[2]...)
	corrupt[len(corrupt)-1] ^= 0xff // the CRC covers it
	c := dial(t, addr)
	codes := sendPipelined(t, c, "idem", [][]byte{batches[0], batches[1], corrupt, batches[3], batches[4]})
	want := []int16{0, 0, kerr.CorruptMessage.Code, kerr.OutOfOrderSequenceNumber.Code, kerr.OutOfOrderSequenceNumber.Code}
	for i := range want {
		if codes[i].err != want[i] {
			t.Fatalf("request %d: error %d, want %d (all: %+v)", i+1, codes[i].err, want[i], codes)
		}
	}
	if codes[0].offset != 0 || codes[1].offset != 3 {
		t.Fatalf("first two at %d and %d, want 0 and 3", codes[0].offset, codes[1].offset)
	}
	retried := sendPipelined(t, c, "idem", batches[1:])
	for i, r := range retried {
		if r.err != 0 || r.offset != int64(3*(i+1)) {
			t.Fatalf("retry of request %d: error %d at offset %d, want offset %d", i+2, r.err, r.offset, 3*(i+1))
		}
	}
	if hwm := b.Topic("idem").Partition(0).HighWatermark(); hwm != 15 {
		t.Fatalf("log holds %d records, want 15: each batch once", hwm)
	}
}

// Five pipelined idempotent requests of which the third fails after it
// was proposed (its write to the partition's log fails, and the replica
// stops): the first two are acknowledged, the third and the ones after it
// fail, nothing acknowledged is lost, and once the broker is back the
// retried batches land once each.
func TestPipelinedProduceStorageFailure(t *testing.T) {
	dir := t.TempDir()
	ffs := failAfter(2)
	b, addr := startServerOn(t, dir, ffs)
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "doomed", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := b.InitProducerID()
	if err != nil {
		t.Fatal(err)
	}
	batches := idempotentRun(pid, epoch, 5, 3)
	res := sendPipelined(t, dial(t, addr), "doomed", batches)
	if res[0].err != 0 || res[1].err != 0 || res[0].offset != 0 || res[1].offset != 3 {
		t.Fatalf("first two: %+v, want acknowledged at 0 and 3", res[:2])
	}
	for i, r := range res[2:] {
		if r.err != kerr.KafkaStorageError.Code && r.err != kerr.NotLeaderForPartition.Code {
			t.Fatalf("request %d after the failed write: error %d, want KAFKA_STORAGE_ERROR or NOT_LEADER_OR_FOLLOWER", i+3, r.err)
		}
	}
	b.Close()

	b, addr = startServerOn(t, dir, nil)
	waitLeader(t, b, "doomed")
	retried := sendPipelined(t, dial(t, addr), "doomed", batches[2:])
	for i, r := range retried {
		if r.err != 0 || r.offset != int64(6+3*i) {
			t.Fatalf("retry of request %d: error %d at offset %d, want offset %d", i+3, r.err, r.offset, 6+3*i)
		}
	}
	if hwm := b.Topic("doomed").Partition(0).HighWatermark(); hwm != 15 {
		t.Fatalf("log holds %d records, want 15: each batch once", hwm)
	}
}

// idempotentRun is n consecutive batches of one producer, each of
// records records.
func idempotentRun(pid int64, epoch int16, n, records int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = logtest.Batch{Records: records, Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: int32(i * records)}.Encode()
	}
	return out
}

type produced struct {
	err    int16
	offset int64
}

// sendPipelined sends one acks=-1 produce request per batch, all before
// reading any answer, and returns each one's outcome.
func sendPipelined(t *testing.T, c *rawConn, topic string, batches [][]byte) []produced {
	t.Helper()
	reqs := make([]*kmsg.ProduceRequest, len(batches))
	corr := make([]int32, len(batches))
	for i, batch := range batches {
		reqs[i] = produceRequest(9, -1, topic, batch)
		corr[i] = c.send(reqs[i])
	}
	out := make([]produced, len(batches))
	for i := range reqs {
		sp := c.read(reqs[i], corr[i]).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		out[i] = produced{err: sp.ErrorCode, offset: sp.BaseOffset}
	}
	return out
}

func producedAt(t *testing.T, resp kmsg.Response) int64 {
	t.Helper()
	sp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("produce failed: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp.BaseOffset
}

func latestOffsetRequest(topic string) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// startServerOn runs a broker on dir, its partition logs on fsys (nil:
// the OS), and its Kafka server; the test's cleanup closes both.
func startServerOn(t *testing.T, dir string, fsys log.FS) (*broker.Broker, string) {
	t.Helper()
	node := config.Node{NodeID: 0, DataDir: dir, KafkaAddr: "127.0.0.1:0", AdvertisedKafkaAddr: "127.0.0.1:9092",
		AdminAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0", LogLevel: "info", MaxRequestBytes: 1 << 20}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(broker.Options{Node: node, Logger: logger, LogFS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	_, addr := serveKafka(t, b, Options{MaxRequestBytes: node.MaxRequestBytes, AdvertisedAddr: node.AdvertisedKafkaAddr, Logger: logger})
	return b, addr
}

// waitLeader waits until the broker leads partition 0 of topic.
func waitLeader(t *testing.T, b *broker.Broker, topic string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if tp := b.Topic(topic); tp != nil {
			if p := tp.Partition(0); p != nil && p.IsLeader() {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s/0 has no leader here after 10 s", topic)
}

// segmentWriteFS calls beforeWrite ahead of every write to a partition's
// segment files; an error from it is the write's.
type segmentWriteFS struct {
	log.OSFS
	beforeWrite func() error
}

// failAfter lets the first allow segment writes through and fails every
// one after them.
func failAfter(allow int64) *segmentWriteFS {
	var writes atomic.Int64
	return &segmentWriteFS{beforeWrite: func() error {
		if writes.Add(1) > allow {
			return errors.New("injected write failure")
		}
		return nil
	}}
}

func (f *segmentWriteFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return &segmentWriteFile{File: file, fs: f}, nil
}

type segmentWriteFile struct {
	log.File
	fs *segmentWriteFS
}

func (f *segmentWriteFile) WriteAt(b []byte, off int64) (int, error) {
	if err := f.fs.beforeWrite(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(b, off)
}

// A pipelined produce request holds its bytes of queued_max_request_bytes
// until it is answered, not only until it is proposed: while its apply is
// held up, the pool stays charged with the request's size and a second
// request that does not fit beside it is not read; once the first is
// answered both are, and every byte comes back.
func TestPipelinedProduceHoldsRequestMemoryUntilAnswered(t *testing.T) {
	gate := &segmentGate{}
	node := config.Node{NodeID: 0, DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", AdvertisedKafkaAddr: "127.0.0.1:9092",
		AdminAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0", LogLevel: "info", MaxRequestBytes: 1 << 20}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(broker.Options{Node: node, Logger: logger, LogFS: gate.fs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s, addr := serveKafka(t, b, Options{MaxRequestBytes: 1 << 20, QueuedMaxRequestBytes: 96 << 10, AdvertisedAddr: node.AdvertisedKafkaAddr, Logger: logger})
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "held", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, b, "held")

	release := gate.close()
	t.Cleanup(release) // before the broker's Close, which waits for its applies
	first := produceRequest(9, -1, "held", logtest.Batch{Records: 1, ValueSize: 60 << 10}.Encode())
	c1, c2 := dial(t, addr), dial(t, addr)
	corr1 := c1.send(first)
	charged := waitPool(t, s, func(st memory.Stats) bool { return st.Used > 60<<10 }, "the first request charged")
	// Its apply cannot finish while the gate is closed: the charge stays.
	time.Sleep(100 * time.Millisecond)
	if st := s.pool.Stats(); st.Used != charged.Used {
		t.Fatalf("pool used %d bytes while the first request is unanswered, want %d still", st.Used, charged.Used)
	}
	second := produceRequest(9, -1, "held", logtest.Batch{Records: 1, ValueSize: 40 << 10}.Encode())
	corr2 := c2.send(second)
	waitPool(t, s, func(st memory.Stats) bool { return st.Waiting == 1 }, "the second request waiting for memory")

	release()
	if got := producedAt(t, c1.read(first, corr1)); got != 0 {
		t.Fatalf("first produce at offset %d, want 0", got)
	}
	if got := producedAt(t, c2.read(second, corr2)); got != 1 {
		t.Fatalf("second produce at offset %d, want 1", got)
	}
	waitPool(t, s, func(st memory.Stats) bool { return st.Used == 0 }, "every byte back")
}

// waitPool waits up to 5 s for the request pool to satisfy ok.
func waitPool(t *testing.T, s *Server, ok func(memory.Stats) bool, what string) memory.Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.pool.Stats()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s (pool %+v)", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// segmentGate holds every write to a partition's segment files while
// closed.
type segmentGate struct {
	mu   sync.Mutex
	open chan struct{} // nil while open
}

// fs is a log.FS whose segment writes pass the gate.
func (g *segmentGate) fs() log.FS {
	return &segmentWriteFS{beforeWrite: func() error {
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		if open != nil {
			<-open
		}
		return nil
	}}
}

// close makes segment writes wait until the returned function reopens
// the gate (once, however often it is called).
func (g *segmentGate) close() (reopen func()) {
	open := make(chan struct{})
	g.mu.Lock()
	g.open = open
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.open = nil
			g.mu.Unlock()
			close(open)
		})
	}
}
