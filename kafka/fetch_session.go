package kafka

// KIP-227 incremental fetch sessions, as Kafka's FetchSession.scala
// defines them.
//
// A session caches, per broker, the partitions a fetcher reads and what
// it was last told of each, so that later requests list only partitions
// whose fetch parameters changed and later responses only partitions
// with something new. The request's (session id, epoch) picks the kind of
// fetch:
//
//	(0, -1)   sessionless full fetch
//	(0, 0)    full fetch that creates a session (if the cache has room)
//	(id, 0)   close session id, then as (0, 0)
//	(id, -1)  close session id, then sessionless
//	(id, n>0) incremental fetch of session id, at epoch n
//
// An incremental request's epoch must be the session's next one (it
// advances by one per request, wrapping to 1), else
// INVALID_FETCH_SESSION_EPOCH; an unknown id is FETCH_SESSION_ID_NOT_FOUND;
// a session created with topic IDs (v13+) used at v12 or below, or the
// other way round, is FETCH_SESSION_TOPIC_ID_ERROR. These answers carry no
// partitions and read nothing.
//
// The session only changes which partitions a request and a response
// list: every fetch reads all of its session's partitions, in the
// session's order, under the same KIP-74 budget and long poll as a full
// fetch of them. A partition that returned records moves to the end of
// that order, so that the broker rotates through the partitions as
// Kafka's does.

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

// Fetch session metadata values (Kafka's FetchMetadata).
const (
	sessionlessID = 0  // INVALID_SESSION_ID: no session
	initialEpoch  = 0  // full request that may create a session
	finalEpoch    = -1 // full request that closes its session, sessionless
)

// fetchSessionEviction is how long a session must go unused before any
// new session may evict it, and how old one must be before a larger one
// may (Kafka's min.incremental.fetch.session.eviction.ms, not
// configurable there either).
const fetchSessionEviction = 120 * time.Second

// fetchSessionIdleRelease is how long a session goes without a fetch
// before its waiter leaves its partitions (sweepIdle): longer than any
// fetch's max wait, which Kafka clients keep below their request timeout
// (30 s by default), so that no waiting fetch loses its wake-ups.
const fetchSessionIdleRelease = 60 * time.Second

// nextFetchEpoch is the epoch that follows epoch: one more, wrapping to
// 1 (0 would mean a new full fetch).
func nextFetchEpoch(epoch int32) int32 {
	switch {
	case epoch < 0:
		return finalEpoch
	case epoch == math.MaxInt32:
		return 1
	default:
		return epoch + 1
	}
}

// fetchSessionCache is one broker's bounded set of fetch sessions,
// evicted by Kafka's rules (tryEvict).
//
// Lock order: the cache's mu, then a session's mu, never the other way:
// the cache's own fields (lastUsed, cachedSize, the evictable flags) are
// kept under the cache's lock, so that eviction never takes a session's.
type fetchSessionCache struct {
	slots      func() int // max_incremental_fetch_session_cache_slots
	evictAfter time.Duration
	now        func() time.Time

	mu       sync.Mutex
	sessions map[int32]*fetchSession

	// Read by the metrics without the lock.
	count      atomic.Int64 // sessions in the cache
	partitions atomic.Int64 // partitions over them, as of their last use
	evictions  atomic.Uint64
}

func newFetchSessionCache(slots func() int, evictAfter time.Duration, now func() time.Time) *fetchSessionCache {
	return &fetchSessionCache{slots: slots, evictAfter: evictAfter, now: now, sessions: map[int32]*fetchSession{}}
}

// fetchSession is one session's partitions, in its order.
type fetchSession struct {
	id         int32
	privileged bool // created by a replica's fetch (replica id >= 0)
	usesIDs    bool // created at v13+: topics are named by ID
	created    time.Time

	// Under the cache's lock.
	lastUsed        time.Time
	cachedSize      int  // partitions at the last use; -1 once out of the cache
	evictableByAll  bool // old enough for any new session to evict, as of the last use
	evictableByPriv bool // evictable by a privileged new session, as of the last use

	// waiter keeps the session's long polls registered with its
	// partitions between fetches; closed with the session.
	waiter *broker.SessionWaiter

	mu    sync.Mutex
	epoch int32 // the epoch the next incremental request must carry
	// topics are the session's topics; partitions point at them, so that
	// a fetch resolves and authorizes each topic once.
	topics     map[sessionTopicKey]*sessionTopic
	topicList  []*sessionTopic
	parts      map[sessionPartKey]*cachedPartition
	head, tail *cachedPartition
	size       int
}

// sessionTopicKey names a session's topic: by ID in sessions that use
// IDs, else by name.
type sessionTopicKey struct {
	name string
	id   [16]byte
}

type sessionTopic struct {
	key  sessionTopicKey
	refs int // partitions of the session in the topic
	// Resolved by each fetch under the session's lock: the topic (nil
	// when unknown or not authorized) and the error its partitions then
	// get.
	topic   *broker.Topic
	unknown error
}

type sessionPartKey struct {
	topic     *sessionTopic
	partition int32
}

// cachedPartition is a session's partition: what the fetcher asked last
// and what it was last told (Kafka's CachedPartition).
type cachedPartition struct {
	topic       *sessionTopic
	partition   int32
	offset      int64
	maxBytes    int32
	leaderEpoch int32
	// What the last response that listed the partition said; -1 before
	// any, and the high watermark -1 after an error, so that the
	// partition is listed again once the error is gone.
	highWatermark, lastStable, logStart int64

	prev, next *cachedPartition
}

// mustRespond reports whether a response lists the partition given its
// read r, and records what it is told: records, a changed high watermark,
// last stable offset or log start offset, a preferred read replica, or an
// error. The last stable offset is compared too (Kafka's CachedPartition
// does not), so that a read_committed consumer learns of it even when the
// transaction's records end where it already is.
func (cp *cachedPartition) mustRespond(r *broker.FetchResult, update bool) bool {
	must := len(r.Records) > 0 || r.PreferredReadReplica >= 0 ||
		cp.highWatermark != r.HighWatermark || cp.lastStable != r.LastStableOffset || cp.logStart != r.LogStartOffset
	if update {
		cp.highWatermark, cp.lastStable, cp.logStart = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
	}
	if r.Err != nil {
		must = true
		if update {
			cp.highWatermark = -1
		}
	}
	return must
}

func newFetchSession(privileged, usesIDs bool) *fetchSession {
	return &fetchSession{
		privileged: privileged, usesIDs: usesIDs, cachedSize: -1, epoch: nextFetchEpoch(initialEpoch), waiter: broker.NewSessionWaiter(),
		topics: map[sessionTopicKey]*sessionTopic{}, parts: map[sessionPartKey]*cachedPartition{},
	}
}

// topicKey is how the session names a request's topic.
func (s *fetchSession) topicKey(name string, id [16]byte) sessionTopicKey {
	if s.usesIDs {
		return sessionTopicKey{id: id}
	}
	return sessionTopicKey{name: name}
}

// upsert adds the partition at the end of the session's order, or
// updates its fetch parameters where it is.
func (s *fetchSession) upsert(key sessionTopicKey, partition int32, offset int64, maxBytes, leaderEpoch int32) *cachedPartition {
	st := s.topics[key]
	if st == nil {
		st = &sessionTopic{key: key}
		s.topics[key] = st
		s.topicList = append(s.topicList, st)
	}
	if cp := s.parts[sessionPartKey{st, partition}]; cp != nil {
		cp.offset, cp.maxBytes, cp.leaderEpoch = offset, maxBytes, leaderEpoch
		return cp
	}
	cp := &cachedPartition{topic: st, partition: partition, offset: offset, maxBytes: maxBytes, leaderEpoch: leaderEpoch,
		highWatermark: -1, lastStable: -1, logStart: -1}
	st.refs++
	s.parts[sessionPartKey{st, partition}] = cp
	s.pushBack(cp)
	s.size++
	return cp
}

// forget drops the partition, if the session has it.
func (s *fetchSession) forget(key sessionTopicKey, partition int32) {
	st := s.topics[key]
	if st == nil {
		return
	}
	pk := sessionPartKey{st, partition}
	cp := s.parts[pk]
	if cp == nil {
		return
	}
	delete(s.parts, pk)
	s.unlink(cp)
	s.size--
	if st.refs--; st.refs == 0 {
		delete(s.topics, key)
		for i, t := range s.topicList {
			if t == st {
				s.topicList = append(s.topicList[:i], s.topicList[i+1:]...)
				break
			}
		}
	}
}

func (s *fetchSession) pushBack(cp *cachedPartition) {
	cp.prev, cp.next = s.tail, nil
	if s.tail != nil {
		s.tail.next = cp
	} else {
		s.head = cp
	}
	s.tail = cp
}

func (s *fetchSession) unlink(cp *cachedPartition) {
	if cp.prev != nil {
		cp.prev.next = cp.next
	} else {
		s.head = cp.next
	}
	if cp.next != nil {
		cp.next.prev = cp.prev
	} else {
		s.tail = cp.prev
	}
	cp.prev, cp.next = nil, nil
}

// moveToEnd puts a partition that returned records last, so that the
// next fetches read the others first.
func (s *fetchSession) moveToEnd(cp *cachedPartition) {
	if s.tail == cp {
		return
	}
	s.unlink(cp)
	s.pushBack(cp)
}

// update applies an incremental request: its partitions are added or
// updated, then its forgotten topics' partitions dropped.
func (s *fetchSession) update(req *kmsg.FetchRequest) {
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		key := s.topicKey(rt.Topic, rt.TopicID)
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			s.upsert(key, rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, requestLeaderEpoch(req.Version, rp))
		}
	}
	for fi := range req.ForgottenTopics {
		ft := &req.ForgottenTopics[fi]
		key := s.topicKey(ft.Topic, ft.TopicID)
		for _, p := range ft.Partitions {
			s.forget(key, p)
		}
	}
}

// requestLeaderEpoch is a partition's current_leader_epoch, -1 (skip the
// check) before v9.
func requestLeaderEpoch(version int16, rp *kmsg.FetchRequestTopicPartition) int32 {
	if version < 9 {
		return -1
	}
	return rp.CurrentLeaderEpoch
}

// fetchContext is what the session cache decided about a request.
type fetchContext struct {
	// errorCode, when set, is the answer: no partitions, nothing read.
	errorCode int16
	// full: a full request that may create a session once answered.
	full bool
	// session, for an incremental request: the session, which the
	// request has already updated, and the epoch the request carried.
	session *fetchSession
	epoch   int32
}

// newContext decides a v7+ request's kind, closing, checking and
// updating sessions as Kafka's FetchManager.newContext does.
func (c *fetchSessionCache) newContext(req *kmsg.FetchRequest) fetchContext {
	if req.SessionEpoch == initialEpoch || req.SessionEpoch == finalEpoch {
		if req.SessionID != sessionlessID {
			c.remove(req.SessionID)
		}
		return fetchContext{full: req.SessionEpoch == initialEpoch}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[req.SessionID]
	if s == nil {
		return fetchContext{errorCode: kerr.FetchSessionIDNotFound.Code}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.epoch != req.SessionEpoch:
		return fetchContext{errorCode: kerr.InvalidFetchSessionEpoch.Code}
	case s.usesIDs != (req.Version >= 13):
		return fetchContext{errorCode: kerr.FetchSessionTopicIDError.Code}
	}
	s.update(req)
	if s.size == 0 {
		// Nothing left: the session ends and the request is answered
		// as a sessionless one of what it listed.
		c.removeLocked(s)
		return fetchContext{}
	}
	c.touchLocked(s, c.now())
	s.epoch = nextFetchEpoch(s.epoch)
	return fetchContext{session: s, epoch: req.SessionEpoch}
}

// create caches a new session unless the cache is full and nothing may
// be evicted for it; it returns the session's id, or 0.
func (c *fetchSessionCache) create(s *fetchSession) int32 {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.slots() && !c.tryEvictLocked(s.privileged, s.size, now) {
		return sessionlessID
	}
	s.id = c.newIDLocked()
	s.created = now
	c.sessions[s.id] = s
	c.count.Store(int64(len(c.sessions)))
	c.touchLocked(s, now)
	return s.id
}

// newIDLocked picks a random positive id no session has.
func (c *fetchSessionCache) newIDLocked() int32 {
	for {
		// The cache holds at most a few thousand of 2^31-1 ids: the
		// first draw is nearly always free.
		id := rand.Int32N(math.MaxInt32-1) + 1
		if c.sessions[id] == nil {
			return id
		}
	}
}

// touchLocked records a use of s: its last use, its size, and whether it
// may be evicted (Kafka's FetchSessionCache.touch).
func (c *fetchSessionCache) touchLocked(s *fetchSession, now time.Time) {
	if s.cachedSize >= 0 {
		c.partitions.Add(-int64(s.cachedSize))
	}
	s.lastUsed = now
	s.cachedSize = s.size
	c.partitions.Add(int64(s.cachedSize))
	old := now.Sub(s.created) > c.evictAfter
	s.evictableByAll = old
	s.evictableByPriv = !s.privileged || old
}

// evictionKey orders sessions by how little it costs to lose them
// (Kafka's EvictableKey): unprivileged before privileged, smaller before
// larger, then by id.
type evictionKey struct {
	privileged bool
	size       int
	id         int32
}

func (k evictionKey) less(o evictionKey) bool {
	if k.privileged != o.privileged {
		return !k.privileged
	}
	if k.size != o.size {
		return k.size < o.size
	}
	return k.id < o.id
}

// tryEvictLocked makes room for a new session by Kafka's rules: the
// least recently used session goes if it has been idle longer than
// evictAfter; otherwise the least valuable evictable session goes if the
// new one is worth more. A session is evictable by a privileged new
// session if it is unprivileged or older than evictAfter, by any new
// session if it is older than evictAfter (as of its last use).
//
// The scans are linear: they run only when the cache is full, over at
// most its slots.
func (c *fetchSessionCache) tryEvictLocked(privileged bool, size int, now time.Time) bool {
	var lru *fetchSession
	for _, s := range c.sessions {
		if lru == nil || s.lastUsed.Before(lru.lastUsed) || (s.lastUsed.Equal(lru.lastUsed) && s.id < lru.id) {
			lru = s
		}
	}
	if lru == nil {
		return false
	}
	if now.Sub(lru.lastUsed) > c.evictAfter {
		c.removeLocked(lru)
		c.evictions.Add(1)
		return true
	}
	var victim *fetchSession
	var victimKey evictionKey
	for _, s := range c.sessions {
		if !s.evictableByAll && !(privileged && s.evictableByPriv) {
			continue
		}
		k := evictionKey{s.privileged, s.cachedSize, s.id}
		if victim == nil || k.less(victimKey) {
			victim, victimKey = s, k
		}
	}
	if victim == nil || (evictionKey{privileged, size, 0}).less(victimKey) {
		return false
	}
	c.removeLocked(victim)
	c.evictions.Add(1)
	return true
}

// sweepIdle releases the waiters of sessions unused for longer than
// fetchSessionIdleRelease: a consumer that went away without closing its
// session (a crash, a lost connection) would otherwise keep its waiter on
// every partition it read until the cache evicts the session, which it
// does only when full, and every append would signal it.
func (c *fetchSessionCache) sweepIdle(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		if now.Sub(s.lastUsed) > fetchSessionIdleRelease {
			s.waiter.Release()
		}
	}
}

// run sweeps idle sessions every interval until ctx ends.
func (c *fetchSessionCache) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.sweepIdle(c.now())
		}
	}
}

// remove closes a session, if it exists.
func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[id]; s != nil {
		c.removeLocked(s)
	}
}

func (c *fetchSessionCache) removeLocked(s *fetchSession) {
	if c.sessions[s.id] != s {
		return
	}
	delete(c.sessions, s.id)
	s.waiter.Close()
	c.count.Store(int64(len(c.sessions)))
	if s.cachedSize >= 0 {
		c.partitions.Add(-int64(s.cachedSize))
	}
	s.cachedSize = -1
}

// sessionFromFull builds the session a full request creates: its
// partitions in request order (a partition listed twice once, where it
// first appears), each with what the response told of it.
func sessionFromFull(req *kmsg.FetchRequest, privileged bool, results []broker.FetchResult) *fetchSession {
	s := newFetchSession(privileged, req.Version >= 13)
	i := 0
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		key := s.topicKey(rt.Topic, rt.TopicID)
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			r := &results[i]
			i++
			if st := s.topics[key]; st != nil && s.parts[sessionPartKey{st, rp.Partition}] != nil {
				continue
			}
			cp := s.upsert(key, rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, requestLeaderEpoch(req.Version, rp))
			cp.mustRespond(r, true)
		}
	}
	return s
}
