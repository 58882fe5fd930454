package kafka

// Fetch, v4-v18.
//
// Behaviour:
//   - KIP-74 exactly, by the broker's fetch planner: partitions are read
//     in request order; the response is bounded by max_bytes (capped by
//     the fetch_max_bytes cluster property) and each partition by its
//     partition_max_bytes; only the first partition that returns data may
//     exceed its limit, by one whole batch. Identical requests make
//     identical reads.
//   - min_bytes / max_wait_ms long polling, woken by appends to any of the
//     fetched partitions, never by polling; like Kafka's DelayedFetch, a
//     waiting fetch counts the bytes appended since its read and reads
//     again only once they may reach min_bytes.
//   - Every requested partition appears in the response, in request
//     order. Per-partition errors are those consumers handle:
//     OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID
//     (v13+, topics by ID), FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
//     (v9+), NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR.
//   - read_committed reads to the last stable offset, which equals the
//     high watermark while there are no transactions; no aborted
//     transactions are ever listed.
//   - Fetch sessions (KIP-227, v7+), as Kafka's (fetch_session.go): a
//     full request with epoch 0 creates a session when the broker's cache
//     (max_incremental_fetch_session_cache_slots) has room; incremental
//     requests list only changed partitions, and their responses only
//     partitions with records or changed metadata, in the session's
//     order. Every fetch still reads all of its partitions.
//   - Responses are written with writev: the response's own fields from
//     the connection's buffer, record batches of 512 bytes or more from
//     the buffer they were read into, shared when the read was coalesced
//     (kafka_fetch_read_coalescing_enabled). The bytes are those kmsg
//     encodes (fetch_encode_test.go).
//   - Authorization: READ on the topic, per topic, else
//     TOPIC_AUTHORIZATION_FAILED for its partitions (checked before the
//     topic's existence; a topic ID that names no topic stays
//     UNKNOWN_TOPIC_ID). Consumers fetching from followers are checked the
//     same way; a fetch that claims to come from a replica (replica id
//     >= 0) needs CLUSTER_ACTION on the cluster instead.
//   - Follower fetching (KIP-392): from v11 any replica serves consumer
//     fetches, a follower up to its own high watermark (an offset past it
//     waits); the leader directs a consumer whose rack_id names another
//     rack to an in-sync replica there, answering at once with
//     preferred_read_replica and no records
//     (enable_rack_aware_follower_fetching). Before v11 only the leader
//     serves; others answer NOT_LEADER_OR_FOLLOWER, naming the leader
//     from v16 (KIP-951). A broker with no replica of the partition
//     answers NOT_LEADER_OR_FOLLOWER.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
)

func (s *Server) handleFetch(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := c.fetchResponse(req.Version)
	var fc fetchContext
	if req.Version >= 7 {
		if fc = s.fetchSessions.newContext(req); fc.errorCode != 0 {
			resp.ErrorCode = fc.errorCode
			return resp, nil
		}
	}
	auth := c.authorizer()
	var plan *fetchScratch
	if fc.session != nil {
		if plan = c.sessionFetchPlan(req, fc, &auth); plan == nil {
			// Another request of the session came first.
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
			return resp, nil
		}
	} else {
		plan = c.fetchPlan(req, &auth)
	}
	// Fetches from replicas are never throttled (weir's replicas follow
	// through Raft; these are tools).
	quota := c.reqQuotas != nil && !fetchFromReplica(req)
	if quota {
		plan.req.MaxBytes = c.fetchQuotaMaxBytes(plan.req.MaxBytes)
	}
	var fetchStart time.Time
	if c.reqQuotas != nil {
		fetchStart = time.Now()
	}
	s.records.Fetch(c.ctx, &plan.req, plan.results)
	if c.reqQuotas != nil {
		c.fetchWait = time.Since(fetchStart)
	}

	throttled := false
	if quota {
		bytes := 0
		for i := range plan.results {
			bytes += len(plan.results[i].Records)
		}
		throttled = c.fetchQuota(resp, bytes)
	}
	switch {
	case throttled:
		// No partitions, the records stay for the consumer's next fetch;
		// a session keeps what it last told (Kafka's throttled response),
		// and a full request creates none.
		for i := range plan.results {
			plan.results[i].Release()
		}
		clear(plan.results)
		if fc.session != nil {
			s.sessionThrottled(resp, fc)
		}
	case fc.session != nil:
		s.incrementalResponse(c, resp, plan, fc)
	default:
		s.fullResponse(c, req, resp, plan)
		if fc.full {
			resp.SessionID = s.fetchSessions.create(sessionFromFull(req, fetchFromReplica(req), plan.results))
		}
	}
	s.countFetched(plan)
	c.fetchResp.plan = plan
	return &c.fetchResp, nil
}

// fullResponse lists every requested partition, in request order.
func (s *Server) fullResponse(c *clientConn, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, plan *fetchScratch) {
	resp.Topics = resize(resp.Topics, len(req.Topics))
	i := 0
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := &resp.Topics[ti]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = resize(st.Partitions, len(rt.Partitions))
		for pi := range rt.Partitions {
			s.fillPartition(c, resp, &st.Partitions[pi], rt.Partitions[pi].Partition, plan, i)
			i++
		}
	}
}

// incrementalResponse lists, in the session's order, the partitions whose
// read the fetcher must hear of, records what it is told, and moves the
// partitions that returned records to the end of the session's order.
func (s *Server) incrementalResponse(c *clientConn, resp *kmsg.FetchResponse, plan *fetchScratch, fc fetchContext) {
	sess := fc.session
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.epoch != nextFetchEpoch(fc.epoch) {
		// A duplicate of the request overtook it: what the session
		// recorded is that one's.
		resp.ErrorCode, resp.SessionID = kerr.InvalidFetchSessionEpoch.Code, sess.id
		return
	}
	resp.SessionID = sess.id
	var cur *sessionTopic
	var st *kmsg.FetchResponseTopic
	for i, cp := range plan.cached {
		r := &plan.results[i]
		if !cp.mustRespond(r, true) {
			continue
		}
		if len(r.Records) > 0 {
			sess.moveToEnd(cp)
		}
		if cp.topic != cur || st == nil {
			cur = cp.topic
			st = nextResponseTopic(resp)
			st.Topic, st.TopicID = cur.key.name, cur.key.id
		}
		st.Partitions = append(st.Partitions, kmsg.FetchResponseTopicPartition{})
		s.fillPartition(c, resp, &st.Partitions[len(st.Partitions)-1], cp.partition, plan, i)
	}
}

// sessionThrottled answers a throttled incremental fetch: no partitions,
// the session unchanged but for its epoch.
func (s *Server) sessionThrottled(resp *kmsg.FetchResponse, fc fetchContext) {
	sess := fc.session
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.epoch != nextFetchEpoch(fc.epoch) {
		resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
	}
	resp.SessionID = sess.id
}

// nextResponseTopic appends a topic to resp, reusing the capacity left
// from the connection's earlier responses.
func nextResponseTopic(resp *kmsg.FetchResponse) *kmsg.FetchResponseTopic {
	n := len(resp.Topics)
	resp.Topics = resize(resp.Topics, n+1)
	st := &resp.Topics[n]
	st.Partitions = st.Partitions[:0]
	st.UnknownTags = kmsg.Tags{}
	return st
}

// fillPartition writes the plan's i-th read as a response partition.
func (s *Server) fillPartition(c *clientConn, resp *kmsg.FetchResponse, sp *kmsg.FetchResponseTopicPartition, partition int32, plan *fetchScratch, i int) {
	r := &plan.results[i]
	*sp = kmsg.NewFetchResponseTopicPartition()
	sp.Partition = partition
	sp.ErrorCode = errorCode(r.Err)
	if resp.Version >= 16 && sp.ErrorCode == kerr.NotLeaderForPartition.Code {
		s.fetchLeaderHint(c, plan.req.Partitions[i].Topic, sp, resp)
	}
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
	sp.PreferredReadReplica = r.PreferredReadReplica
	sp.AbortedTransactions = abortedTransactions(r.Aborted)
	// Empty, never null: librdkafka rejects a null record set
	// (MessageSetSize -1), Kafka always sends a length.
	sp.RecordBatches = r.Records
	if sp.RecordBatches == nil {
		sp.RecordBatches = []byte{}
	}
}

// fetchResponse returns the connection's reused Fetch response, emptied
// but keeping its slices' capacity: one fetch runs per connection at a
// time, and its response is written before the next is read.
func (c *clientConn) fetchResponse(version int16) *kmsg.FetchResponse {
	r := c.fetchResp.FetchResponse
	if r == nil {
		r = new(kmsg.FetchResponse)
		c.fetchResp.FetchResponse = r
	}
	*r = kmsg.FetchResponse{Topics: r.Topics[:0]}
	r.Default()
	r.SetVersion(version)
	return r
}

// resize returns s with length n, reusing its capacity; the elements'
// own slices are kept for reuse too.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return append(s[:cap(s)], make([]T, n-cap(s))...)[:n]
	}
	return s[:n]
}

// fetchResponse is a Fetch answer written as pieces: its own fields, then
// each partition's record batches from the buffer they were read into —
// with coalescing, one buffer shared by every consumer of the same read.
// The buffers are released once written.
type fetchResponse struct {
	*kmsg.FetchResponse
	plan *fetchScratch
}

// release gives back the record buffers and drops the references, so the
// connection's scratch space does not pin them.
func (r *fetchResponse) release() {
	for i := range r.plan.results {
		r.plan.results[i].Release()
	}
	clear(r.plan.results)
	clear(r.plan.cached)
	for ti := range r.Topics {
		for pi := range r.Topics[ti].Partitions {
			r.Topics[ti].Partitions[pi].RecordBatches = nil
		}
	}
}

// countFetched adds the record bytes a fetch returned to their topics'
// counters, once per run of partitions of the same topic: a fetch lists
// a topic's partitions together.
func (s *Server) countFetched(plan *fetchScratch) {
	var (
		topic *broker.Topic
		bytes int
	)
	for i := range plan.results {
		t := plan.req.Partitions[i].Topic
		if t != topic {
			if topic != nil && bytes > 0 {
				s.metrics.topics.fetched(topic, bytes)
			}
			topic, bytes = t, 0
		}
		bytes += len(plan.results[i].Records)
	}
	if topic != nil && bytes > 0 {
		s.metrics.topics.fetched(topic, bytes)
	}
}

// fetchLeaderHint names the partition's leader in a NOT_LEADER_OR_FOLLOWER
// answer (KIP-951, v16+) so the consumer moves without a metadata round
// trip.
func (s *Server) fetchLeaderHint(c *clientConn, t *broker.Topic, sp *kmsg.FetchResponseTopicPartition, resp *kmsg.FetchResponse) {
	if t == nil {
		return
	}
	leader, epoch, ok := s.cluster.LeaderHint(t, sp.Partition)
	if !ok {
		return
	}
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader.NodeID, epoch
	if leader, ok = c.reachable(leader); !ok {
		return // no endpoint on this listener: the client asks Metadata
	}
	for _, b := range resp.Brokers {
		if b.NodeID == leader.NodeID {
			return
		}
	}
	resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: leader.NodeID, Host: leader.Host, Port: leader.Port, Rack: rackPtr(leader.Rack)})
}

// fetchScratch is a connection's reusable fetch plan: one fetch at a time
// runs per connection, so its partition and result slices are reused
// instead of allocated per request.
type fetchScratch struct {
	req     broker.FetchRequest
	results []broker.FetchResult
	// cached are an incremental fetch's session partitions, aligned
	// with req.Partitions.
	cached []*cachedPartition
}

// startPlan fills the request-wide part of the connection's plan and
// empties its partitions.
func (c *clientConn) startPlan(req *kmsg.FetchRequest) *fetchScratch {
	p := &c.fetch
	// One connection's response is capped, so that a client that stops
	// reading holds at most that much of the fetch budget.
	p.req.MaxBytes = int32(min(int64(req.MaxBytes), c.s.opts.ConnectionMaxUnwrittenBytes))
	if req.MaxBytes <= 0 {
		p.req.MaxBytes = int32(c.s.opts.ConnectionMaxUnwrittenBytes)
	}
	p.req.MinBytes = req.MinBytes
	p.req.MaxWait = time.Duration(req.MaxWaitMillis) * time.Millisecond
	p.req.Isolation = req.IsolationLevel
	// v11+ consumer fetches may be served by a follower, and name the
	// consumer's rack (KIP-392).
	p.req.FollowerOK = req.Version >= 11 && req.ReplicaID < 0
	p.req.RackID = ""
	if req.Version >= 11 {
		p.req.RackID = req.Rack
	}
	p.req.Partitions = p.req.Partitions[:0]
	p.req.Waiter = nil
	p.cached = p.cached[:0]
	return p
}

// sizeResults gives the plan one result per partition.
func (p *fetchScratch) sizeResults() {
	if n := len(p.req.Partitions); cap(p.results) < n {
		p.results = make([]broker.FetchResult, n)
	} else {
		p.results = p.results[:n]
	}
}

// fetchTopicResolver resolves a fetch's topics and checks that its
// principal may read them.
type fetchTopicResolver struct {
	req            *kmsg.FetchRequest
	auth           *requestAuthorizer
	replicaAllowed bool
}

func (c *clientConn) topicResolver(req *kmsg.FetchRequest, auth *requestAuthorizer) fetchTopicResolver {
	// A fetch from a replica needs CLUSTER_ACTION instead of READ on its
	// topics, as in Kafka; weir's replicas follow through Raft, so this is
	// a tool posing as one.
	replicaAllowed := true
	if auth.enabled && fetchFromReplica(req) {
		replicaAllowed = auth.cluster(kmsg.ACLOperationClusterAction)
	}
	return fetchTopicResolver{req: req, auth: auth, replicaAllowed: replicaAllowed}
}

// resolve finds a topic named by name (before v13) or id (v13+), and the
// error its partitions get when it is unknown or may not be read.
func (r *fetchTopicResolver) resolve(b topicCatalog, name string, id [16]byte) (*broker.Topic, error) {
	var t *broker.Topic
	var unknown error
	if r.req.Version >= 13 {
		t, unknown = b.TopicByID(controller.TopicID(id)), kerr.UnknownTopicID
	} else {
		t, unknown = b.Topic(name), kerr.UnknownTopicOrPartition
	}
	if r.auth.enabled && !fetchAllowed(r.req, name, t, r.auth, r.replicaAllowed) {
		t, unknown = nil, kerr.TopicAuthorizationFailed
	}
	return t, unknown
}

func (c *clientConn) fetchPlan(req *kmsg.FetchRequest, auth *requestAuthorizer) *fetchScratch {
	p := c.startPlan(req)
	res := c.topicResolver(req, auth)
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		t, unknown := res.resolve(c.s.topics, rt.Topic, rt.TopicID)
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			p.req.Partitions = append(p.req.Partitions, broker.FetchPartition{
				Topic: t, UnknownErr: unknown, Partition: rp.Partition, Offset: rp.FetchOffset,
				MaxBytes: rp.PartitionMaxBytes, LeaderEpoch: requestLeaderEpoch(req.Version, rp),
			})
		}
	}
	p.sizeResults()
	return p
}

// sessionFetchPlan plans an incremental fetch: every partition of its
// session, in the session's order, each topic resolved and authorized
// once. It returns nil if another request of the session came first.
func (c *clientConn) sessionFetchPlan(req *kmsg.FetchRequest, fc fetchContext, auth *requestAuthorizer) *fetchScratch {
	p := c.startPlan(req)
	res := c.topicResolver(req, auth)
	sess := fc.session
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.epoch != nextFetchEpoch(fc.epoch) {
		return nil
	}
	for _, st := range sess.topicList {
		st.topic, st.unknown = res.resolve(c.s.topics, st.key.name, st.key.id)
	}
	for cp := sess.head; cp != nil; cp = cp.next {
		p.req.Partitions = append(p.req.Partitions, broker.FetchPartition{
			Topic: cp.topic.topic, UnknownErr: cp.topic.unknown, Partition: cp.partition, Offset: cp.offset,
			MaxBytes: cp.maxBytes, LeaderEpoch: cp.leaderEpoch,
		})
		p.cached = append(p.cached, cp)
	}
	p.req.Waiter = sess.waiter
	p.sizeResults()
	return p
}

// fetchFromReplica reports whether the fetch says it comes from a broker
// (replica id >= 0; in ReplicaState from v15, KIP-903).
func fetchFromReplica(req *kmsg.FetchRequest) bool {
	if req.Version >= 15 {
		return req.ReplicaState.ID >= 0
	}
	return req.ReplicaID >= 0
}

// fetchAllowed applies Kafka's order: a topic named by an unknown ID is
// UNKNOWN_TOPIC_ID whoever asks; a topic named by name is checked before
// its existence, so that a consumer cannot learn which topics exist.
func fetchAllowed(req *kmsg.FetchRequest, name string, t *broker.Topic, auth *requestAuthorizer, replicaAllowed bool) bool {
	switch {
	case fetchFromReplica(req):
		return replicaAllowed
	case req.Version >= 13:
		return t == nil || auth.topic(kmsg.ACLOperationRead, t.Name())
	default:
		return auth.topic(kmsg.ACLOperationRead, name)
	}
}

// noAbortedTransactions answers read_committed partitions with none.
var noAbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}

// abortedTransactions is a result's aborted list as the response carries
// it: null for read_uncommitted, a list for read_committed.
func abortedTransactions(list []broker.AbortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	switch {
	case list == nil:
		return nil
	case len(list) == 0:
		return noAbortedTransactions
	}
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(list))
	for i, a := range list {
		out[i] = kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
	}
	return out
}
