package group

import (
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// Offsets committed in transactions (TxnOffsetCommit, KIP-98/447). They
// are written to __consumer_offsets as a transactional batch of the
// producer and held per producer, invisible to OffsetFetch, until the
// transaction's marker reaches the group's partition: a COMMIT makes them
// the group's offsets, an ABORT drops them. A replay does the same with
// the markers it meets, and keeps what no marker decided yet.

// pendingOffset is an offset of an open transaction and where its record
// is in the group's partition: a marker decides only records before it.
type pendingOffset struct {
	o         offset
	logOffset int64
}

// txnOffsets are a group's pending offsets by producer id, topic and
// partition; owned by the group's loop (or the replay building it).
type txnOffsets map[int64]map[string]map[int32]pendingOffset

func (t txnOffsets) add(pid int64, topic string, partition int32, po pendingOffset) {
	byTopic := t[pid]
	if byTopic == nil {
		byTopic = map[string]map[int32]pendingOffset{}
		t[pid] = byTopic
	}
	if byTopic[topic] == nil {
		byTopic[topic] = map[int32]pendingOffset{}
	}
	byTopic[topic][partition] = po
}

// pendingFor reports whether some producer holds an offset of the
// partition in an open transaction.
func (t txnOffsets) pendingFor(topic string, partition int32) bool {
	for _, byTopic := range t {
		if _, ok := byTopic[topic][partition]; ok {
			return true
		}
	}
	return false
}

// TxnOffsetCommit stores offsets as part of the producer's transaction.
// A member's commit is checked as OffsetCommit checks it (KIP-447:
// generation, member id, instance id); a producer outside the group
// (generation -1, no member) commits for an empty group as a standalone
// commit would.
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	failAll := func(code int16) *kmsg.TxnOffsetCommitResponse {
		resp.Topics = nil
		for _, rt := range req.Topics {
			st := kmsg.TxnOffsetCommitResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				st.Partitions = append(st.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: rp.Partition, ErrorCode: code})
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	if req.Group == "" || len(req.Group) > maxStringBytes {
		return failAll(kerr.InvalidGroupID.Code)
	}
	if code := c.unavailable(req.Group); code != 0 {
		return failAll(code)
	}
	g, code := c.get(req.Group, true)
	if code != 0 {
		return failAll(code)
	}
	if !g.do(func() { g.txnCommit(req, resp) }) {
		return failAll(g.stopErr(kerr.CoordinatorNotAvailable.Code))
	}
	return resp
}

func (g *group) txnCommit(req *kmsg.TxnOffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse) {
	code := int16(0)
	if g.cg != nil && g.state != Dead && (req.Generation >= 0 || req.MemberID != "") {
		code = g.consumerCommitCode(req.MemberID, req.Generation, req.Version, true)
	} else if req.Generation >= 0 || req.MemberID != "" {
		code = g.commitCode(&kmsg.OffsetCommitRequest{Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID})
	} else if g.state == Dead {
		code = kerr.CoordinatorNotAvailable.Code
	}
	now := g.c.now().UnixMilli()
	type write struct {
		topic     string
		partition int32
		o         offset
		code      *int16
	}
	var writes []write
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Partition = rp.Partition
			if sp.ErrorCode = code; code != 0 {
				continue
			}
			o, code := g.checkedOffset(rt.Topic, rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, now)
			if sp.ErrorCode = code; code == 0 {
				writes = append(writes, write{rt.Topic, rp.Partition, o, &sp.ErrorCode})
			}
		}
	}
	if len(writes) == 0 {
		return
	}
	records := make([]log.KeyValue, len(writes))
	for i, w := range writes {
		records[i] = log.KeyValue{Key: offsetKey(g.id, w.topic, w.partition), Value: offsetValue(w.o)}
	}
	first, err := g.c.opts.Store.AppendTxn(g.c.Partition(g.id), req.ProducerID, req.ProducerEpoch, records)
	if err != nil {
		code := txnAppendCode(err)
		for _, w := range writes {
			*w.code = code
		}
		return
	}
	if g.txn == nil {
		g.txn = txnOffsets{}
	}
	for i, w := range writes {
		g.txn.add(req.ProducerID, w.topic, w.partition, pendingOffset{w.o, first + int64(i)})
	}
}

// txnAppendCode is what TxnOffsetCommit answers when its records could
// not be written, as Kafka's group coordinator maps the append's error:
// the partition's leadership moved is NOT_COORDINATOR (the client looks
// the coordinator up again); a producer the partition has seen with a
// newer epoch (fenced by a transaction timeout or a new producer) gets
// INVALID_PRODUCER_EPOCH, which it must not retry; too large a commit is
// INVALID_COMMIT_OFFSET_SIZE; anything else COORDINATOR_NOT_AVAILABLE.
func txnAppendCode(err error) int16 {
	switch {
	case errors.Is(err, kerr.NotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, kerr.InvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return kerr.InvalidCommitOffsetSize.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// settle applies a marker at markerOffset of producer pid to the group's
// pending offsets written before it.
func (g *group) settle(pid, markerOffset int64, commit bool) {
	byTopic := g.txn[pid]
	for topic, ps := range byTopic {
		for partition, po := range ps {
			if po.logOffset >= markerOffset {
				continue
			}
			if commit {
				commitPending(g.offsets, topic, partition, po)
			}
			delete(ps, partition)
		}
		if len(ps) == 0 {
			delete(byTopic, topic)
		}
	}
	if len(byTopic) == 0 {
		delete(g.txn, pid)
	}
}

// commitPending makes a committed transaction's offset the partition's,
// unless a plain commit written after it in the log already is: Kafka
// keeps the commit with the higher record offset, so a consumer's own
// later commit is not undone by a transaction that commits after it.
func commitPending(offsets map[string]map[int32]offset, topic string, partition int32, po pendingOffset) {
	if cur, ok := offsets[topic][partition]; ok && cur.logOffset > po.logOffset {
		return
	}
	o := po.o
	o.logOffset = po.logOffset
	ps := offsets[topic]
	if ps == nil {
		ps = map[int32]offset{}
		offsets[topic] = ps
	}
	ps[partition] = o
}

// markerQueue hands markers from the partitions' apply goroutines, which
// must not wait for a group's loop, to one goroutine that settles them in
// order.
type markerQueue struct {
	mu      sync.Mutex
	pending []txnMarker
	running bool
}

type txnMarker struct {
	partition   int32
	offset, pid int64
	commit      bool
}

// TxnMarker tells the coordinator that a transaction marker of producer
// pid was appended at offset to partition p of __consumer_offsets. It
// never blocks; the groups of p settle their pending offsets in marker
// order.
func (c *Coordinator) TxnMarker(p int32, offset, pid int64, commit bool) {
	q := &c.markers
	q.mu.Lock()
	q.pending = append(q.pending, txnMarker{p, offset, pid, commit})
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go c.settleMarkers()
	}
}

func (c *Coordinator) settleMarkers() {
	q := &c.markers
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		m := q.pending[0]
		q.pending = q.pending[1:]
		q.mu.Unlock()
		partitions := c.opts.Store.Partitions()
		c.mu.Lock()
		var groups []*group
		for id, g := range c.groups {
			if PartitionFor(id, partitions) == m.partition {
				groups = append(groups, g)
			}
		}
		c.mu.Unlock()
		for _, g := range groups {
			g.do(func() { g.settle(m.pid, m.offset, m.commit) })
		}
	}
}
