package kafka

// Produce, v0-v13.
//
// Behaviour:
//   - v0-v2 are advertised (older librdkafka decides whether to compress
//     from them, as with Kafka 4) but refused: every partition gets
//     UNSUPPORTED_VERSION, since they carry pre-v2 message sets.
//   - Consecutive produce requests on a connection are pipelined
//     (pipeline.go): each is proposed as soon as it is read, responses go
//     out in request order.
//   - acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). acks=-1
//     answers once the batch is committed by the partition's Raft group
//     (on a majority of replicas' disks) and applied on the leader;
//     acks=1 once it is fsynced in the leader's Raft log, for batches
//     without a producer id (broker/produce_acks.go; others as acks=-1);
//     acks=0 sends no response. The request's timeout bounds the
//     wait (REQUEST_TIMED_OUT). Partitions of one request are replicated
//     concurrently.
//   - A broker that does not lead a partition answers
//     NOT_LEADER_OR_FOLLOWER, and from v10 names the leader it knows
//     (KIP-951: current_leader and node_endpoints).
//   - Per partition: unknown topic UNKNOWN_TOPIC_OR_PARTITION (or, v13+,
//     UNKNOWN_TOPIC_ID; auto-created when the cluster allows it), a
//     malformed batch CORRUPT_MESSAGE, a batch above max.message.bytes
//     MESSAGE_TOO_LARGE, records above segment.bytes
//     RECORD_LIST_TOO_LARGE, idempotence violations
//     OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_PRODUCER_EPOCH; a retried
//     batch gets its original offsets and no error.
//   - Authorization: WRITE on the topic, per topic, else
//     TOPIC_AUTHORIZATION_FAILED for its partitions; a topic that does not
//     exist is created only for a client allowed CREATE on the cluster or
//     the topic (else UNKNOWN_TOPIC_OR_PARTITION). A transactional produce
//     needs WRITE on its transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition.
//   - Exactly one batch per partition; control batches, transactional
//     batches of a request without a transactional id and idempotent
//     batches without a sequence are INVALID_RECORD; a batch outside the
//     producer's open transaction is INVALID_TXN_STATE; zstd before v7
//     and unknown codecs are UNSUPPORTED_COMPRESSION_TYPE.
//   - A transactional batch that would open the producer's transaction on
//     the partition is first verified with the transaction coordinator
//     (KIP-890 part 1, transaction_partition_verification_enable): a
//     partition not in the ongoing transaction is INVALID_TXN_STATE
//     before v11 and TRANSACTION_ABORTABLE from v11, another epoch
//     INVALID_PRODUCER_EPOCH, a coordinator that cannot answer yet
//     NOT_ENOUGH_REPLICAS (retried).
//   - Per record, as Kafka's LogValidator: a record without a key on a
//     topic whose cleanup.policy includes compact is INVALID_RECORD, a
//     CreateTime timestamp outside message.timestamp.before.max.ms /
//     after.max.ms of the leader's clock INVALID_TIMESTAMP; v8+ name the
//     records in record_errors (batch_index, message) and carry Kafka's
//     error_message. A batch whose codec is not the topic's
//     compression.type (unless producer) is re-encoded before it is
//     appended.
//   - acks=-1 to a partition with fewer live in-sync replicas than
//     min.insync.replicas is NOT_ENOUGH_REPLICAS, before its records are
//     looked at; acks=1 and 0 are not checked, as in Kafka. The commit
//     itself is the Raft majority's whatever min.insync.replicas is.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
)

// handleProduce answers a produce request on its own, waiting for every
// partition's outcome; the connection's serve loop uses startProduce
// instead, to pipeline.
func (s *Server) handleProduce(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp, done := s.startProduce(c, req, nil)
	<-done
	if req.Acks == 0 {
		return nil, nil
	}
	return resp, nil
}

// startProduce checks the request and proposes each partition's batch to
// its Raft group, in request order, and returns the response with a
// channel closed once every partition has its outcome. Nothing of req is
// used after it returns (the frame it was read from is reused). entries,
// for a request read with its record sets outside the frame
// (produce_frame.go), are their buffers per partition in request order
// (nil where a record set stayed in the frame); each goes to the produce
// path with its batch, or back to it.
func (s *Server) startProduce(c *clientConn, req *kmsg.ProduceRequest, entries [][]byte) (*kmsg.ProduceResponse, <-chan struct{}) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	auth := c.authorizer()
	var reqErr error
	switch {
	case req.Version < 3:
		reqErr = kerr.UnsupportedVersion
	case req.Acks != -1 && req.Acks != 0 && req.Acks != 1:
		reqErr = kerr.InvalidRequiredAcks
	case req.TransactionID != nil && !auth.transactionalID(kmsg.ACLOperationWrite, *req.TransactionID):
		reqErr = kerr.TransactionalIDAuthorizationFailed
	}
	opts := broker.ProduceOptions{AllowZstd: req.Version >= 7, Acks: req.Acks, Version: req.Version}
	if req.TransactionID != nil {
		opts.TransactionalID = *req.TransactionID
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultProduceTimeout
	}
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	version := req.Version
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	var jobs []produceJob
	k := 0 // the partition's place in the request, for entries
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name, topicErr := rt.Topic, reqErr
		if topicErr == nil && version >= 13 {
			if t := s.topics.TopicByID(controller.TopicID(rt.TopicID)); t != nil {
				name = t.Name()
			} else {
				topicErr = kerr.UnknownTopicID
			}
		}
		if topicErr == nil && auth.enabled {
			topicErr = s.authorizeProduce(&auth, name)
		}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			rp := &rt.Partitions[j]
			sp.Partition = rp.Partition
			var entry []byte
			if entries != nil {
				entry = entries[k]
			}
			k++
			if topicErr != nil {
				if entry != nil {
					s.records.ReleaseProduceBuffer(entry)
				}
				s.produceFailed(c, version, name, sp, topicErr)
				continue
			}
			// Counted before the batch is proposed: from then on its
			// bytes may be Raft's (the apply stamps offsets into them).
			job := produceJob{name: name, resp: sp, bytes: len(rp.Records), records: batchRecords(rp.Records)}
			popts := opts
			popts.Entry = entry
			pending, err := s.records.StartProduce(ctx, name, rp.Partition, rp.Records, popts)
			if err != nil {
				s.produceFailed(c, version, name, sp, err)
				continue
			}
			job.pending = pending
			jobs = append(jobs, job)
		}
	}
	// The context bounded the proposing. The wait for the outcomes ends
	// at the request's timeout, counted from here as Kafka counts it
	// from the append; a connection that closes meanwhile drops its
	// pending responses and needs no end of its own.
	cancel()
	done := make(chan struct{})
	if len(jobs) == 0 {
		s.finishProduce(c, version, resp)
		close(done)
		return resp, done
	}
	w := &produceWait{s: s, c: c, version: version, resp: resp, jobs: jobs, left: len(jobs), done: done}
	w.mu.Lock()
	w.timer = time.AfterFunc(timeout, w.expire)
	w.mu.Unlock()
	for i := range jobs {
		jobs[i].pending.Then(func(res broker.AppendResult, err error) { w.answer(i, res, err) })
	}
	return resp, done
}

// produceWait is a produce request whose batches are proposed: each
// batch's outcome fills its partition's part of the response as it
// arrives, on the goroutine that learned it, and the last one completes
// the response, so no goroutine waits per request or per batch.
type produceWait struct {
	s       *Server
	c       *clientConn
	version int16
	resp    *kmsg.ProduceResponse
	done    chan struct{}

	mu    sync.Mutex
	timer *time.Timer // runs expire
	jobs  []produceJob
	left  int // jobs not answered; 0 once done is closed
}

// answer fills job i's partition with its batch's outcome, unless the
// request expired first.
func (w *produceWait) answer(i int, res broker.AppendResult, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := &w.jobs[i]
	if j.answered {
		return
	}
	j.answered = true
	if err != nil {
		w.s.produceFailed(w.c, w.version, j.name, j.resp, err)
	} else {
		j.resp.BaseOffset, j.resp.LogAppendTime, j.resp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
		if t := w.s.topics.Topic(j.name); t != nil {
			w.s.metrics.topics.produced(t, j.bytes, j.records)
		}
	}
	if w.left--; w.left == 0 {
		w.finish()
	}
}

// expire answers the batches still waiting when the request's timeout
// passed: REQUEST_TIMED_OUT, as Kafka's purgatory answers them (they may
// still commit).
func (w *produceWait) expire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.left == 0 {
		return
	}
	for i := range w.jobs {
		if j := &w.jobs[i]; !j.answered {
			j.answered = true
			w.s.produceFailed(w.c, w.version, j.name, j.resp, j.pending.Expired())
		}
	}
	w.left = 0
	w.finish()
}

// finish completes the response; w.mu is held.
func (w *produceWait) finish() {
	w.timer.Stop()
	w.s.finishProduce(w.c, w.version, w.resp)
	close(w.done)
}

// finishProduce completes a response whose partitions all have their
// outcome.
func (s *Server) finishProduce(c *clientConn, version int16, resp *kmsg.ProduceResponse) {
	if version >= 10 {
		s.addLeaderEndpoints(c, resp)
	}
}

// authorizeProduce checks one topic of a produce request: WRITE on it,
// and, for a topic that does not exist yet, what creating it needs (CREATE
// on the cluster or the topic) since a produce may create it here. Kafka's
// produce never creates topics and answers UNKNOWN_TOPIC_OR_PARTITION for
// one that does not exist, which is what a producer without CREATE gets.
func (s *Server) authorizeProduce(auth *requestAuthorizer, topic string) error {
	if !auth.topic(kmsg.ACLOperationWrite, topic) {
		return kerr.TopicAuthorizationFailed
	}
	if s.topics.Topic(topic) == nil && !auth.mayCreateTopic(topic) {
		return kerr.UnknownTopicOrPartition
	}
	return nil
}

// defaultProduceTimeout bounds a request that gives no timeout.
const defaultProduceTimeout = 30 * time.Second

// produceJob is one partition of a produce request, proposed.
type produceJob struct {
	name    string
	resp    *kmsg.ProduceResponseTopicPartition
	pending broker.PendingAppend
	// What the topic's metrics count, taken from the request's records
	// before the frame holding them is reused.
	bytes   int
	records uint64
	// answered: resp holds the outcome (produceWait.mu).
	answered bool
}

func (s *Server) produceFailed(c *clientConn, version int16, topic string, sp *kmsg.ProduceResponseTopicPartition, err error) {
	sp.ErrorCode, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = errorCode(err), -1, -1, -1
	if version >= 8 {
		sp.ErrorMessage = errorMessage(err)
		var refused *broker.RecordsRefusedError
		if errors.As(err, &refused) {
			for _, r := range refused.Records {
				msg := r.Message
				sp.ErrorRecords = append(sp.ErrorRecords, kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: r.Index, ErrorMessage: &msg})
			}
		}
	}
	if version >= 10 && sp.ErrorCode == kerr.NotLeaderForPartition.Code {
		if t := s.topics.Topic(topic); t != nil {
			if leader, epoch, ok := s.cluster.LeaderHint(t, sp.Partition); ok {
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader.NodeID, epoch
			}
		}
	}
	c.logger.Debug("produce refused", "topic", topic, "partition", sp.Partition, "err", err)
}

// addLeaderEndpoints lists the brokers named as new leaders (KIP-951).
func (s *Server) addLeaderEndpoints(c *clientConn, resp *kmsg.ProduceResponse) {
	seen := map[int32]bool{}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			id := sp.CurrentLeader.LeaderID
			if id < 0 || seen[id] {
				continue
			}
			seen[id] = true
			if info, ok := s.cluster.Broker(id); ok {
				if info, ok = c.reachable(info); !ok {
					continue // no endpoint on this listener
				}
				resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: info.NodeID, Host: info.Host, Port: info.Port, Rack: rackPtr(info.Rack)})
			}
		}
	}
}

func rackPtr(rack string) *string {
	if rack == "" {
		return nil
	}
	return &rack
}
