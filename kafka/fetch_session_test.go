package kafka

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log/logtest"
)

// sessionFetch is a fetch of partitions 0..n-1 of one topic (by name
// before v13, by ID from v13) at the given offsets, with the session
// metadata given. A nil offsets lists no partition.
func sessionFetch(version int16, topic string, id [16]byte, sessionID, epoch int32, offsets map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID = -1
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 1<<20, 0, 0
	req.SessionID, req.SessionEpoch = sessionID, epoch
	if len(offsets) == 0 {
		return req
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	parts := make([]int32, 0, len(offsets))
	for p := range offsets {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offsets[p], 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// forget adds a forgotten topic with the partitions.
func forget(req *kmsg.FetchRequest, topic string, id [16]byte, parts ...int32) {
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.TopicID, ft.Partitions = topic, id, parts
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
}

// listed is the response's partitions as "p:records" (records counted),
// in response order, over its topics.
func listed(t *testing.T, resp *kmsg.FetchResponse) []string {
	t.Helper()
	var out []string
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			s := fmt.Sprintf("%d:%d", rp.Partition, countRecords(t, rp.RecordBatches))
			if rp.ErrorCode != 0 {
				s += fmt.Sprintf("!%d", rp.ErrorCode)
			}
			out = append(out, s)
		}
	}
	return out
}

func produceTo(t *testing.T, c *rawConn, topic string, partition int32, records int) {
	t.Helper()
	req := produceRequest(9, -1, topic, logtest.Batch{Records: records, ValueSize: 10}.Encode())
	req.Topics[0].Partitions[0].Partition = partition
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce to %s/%d: error %d", topic, partition, code)
	}
}

func fetchOK(t *testing.T, c *rawConn, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	t.Helper()
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch (session %d epoch %d): error %d", req.SessionID, req.SessionEpoch, resp.ErrorCode)
	}
	return resp
}

func wantListed(t *testing.T, what string, resp *kmsg.FetchResponse, want ...string) {
	t.Helper()
	if got := listed(t, resp); !slices.Equal(got, want) {
		t.Fatalf("%s: response lists %v, want %v", what, got, want)
	}
}

// TestFetchSessionLifecycle walks a session through every transition,
// names (v12) and topic IDs (v13): creation, incremental fetches that
// list only what changed (records, high watermark, log start offset,
// errors), forgotten partitions, epochs, closing and replacing.
func TestFetchSessionLifecycle(t *testing.T) {
	for _, v := range []int16{7, 12, 13, 16} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			_, b, addr := startServer(t)
			topic := "life"
			tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: topic, Partitions: 3})
			if err != nil {
				t.Fatal(err)
			}
			c := dial(t, addr)
			produceTo(t, c, topic, 0, 2)
			produceTo(t, c, topic, 1, 1)

			// (0,0): a full fetch answered with every partition and a
			// new session.
			resp := fetchOK(t, c, sessionFetch(v, topic, tp.ID(), 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}))
			wantListed(t, "full", resp, "0:2", "1:1", "2:0")
			id := resp.SessionID
			if id <= 0 {
				t.Fatalf("full fetch with epoch 0: session id %d, want > 0", id)
			}
			if v >= 13 && resp.Topics[0].TopicID != tp.ID() {
				t.Fatal("v13+: topic id not echoed")
			}

			// Incremental, offsets moved on: nothing changed, nothing
			// listed.
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 1, map[int32]int64{0: 2, 1: 1}))
			if resp.SessionID != id {
				t.Fatalf("incremental: session id %d, want %d", resp.SessionID, id)
			}
			wantListed(t, "idle incremental", resp)

			// Records in partition 2 only: only it is listed.
			produceTo(t, c, topic, 2, 3)
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 2, nil))
			wantListed(t, "after a produce to 2", resp, "2:3")
			if hw := resp.Topics[0].Partitions[0].HighWatermark; hw != 3 {
				t.Fatalf("partition 2 high watermark %d, want 3", hw)
			}
			// The session still fetches 2 from 0 (its offset did not
			// change): records again, listed again.
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 3, map[int32]int64{2: 3}))
			wantListed(t, "2 caught up", resp)

			// A moved log start offset is listed without records.
			p0, _ := tp.LocalPartition(0)
			if _, err := b.DeleteRecords(context.Background(), p0, 1); err != nil {
				t.Fatal(err)
			}
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 4, nil))
			wantListed(t, "after DeleteRecords", resp, "0:0")
			if ls := resp.Topics[0].Partitions[0].LogStartOffset; ls != 1 {
				t.Fatalf("log start offset %d, want 1", ls)
			}

			// An error is listed every time: an offset out of range.
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 5, map[int32]int64{1: 99}))
			wantListed(t, "out of range", resp, fmt.Sprintf("1:0!%d", kerr.OffsetOutOfRange.Code))
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 6, nil))
			wantListed(t, "still out of range", resp, fmt.Sprintf("1:0!%d", kerr.OffsetOutOfRange.Code))
			// Fixed: listed once more (its cached high watermark was
			// reset by the error), then not.
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 7, map[int32]int64{1: 1}))
			wantListed(t, "fixed", resp, "1:0")
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 8, nil))
			wantListed(t, "fixed, idle", resp)

			// Forgotten: partition 2 is no longer fetched.
			req := sessionFetch(v, topic, tp.ID(), id, 9, nil)
			forget(req, topic, tp.ID(), 2)
			fetchOK(t, c, req)
			produceTo(t, c, topic, 2, 1)
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 10, nil))
			wantListed(t, "2 forgotten", resp)

			// Wrong epochs: a replay, one ahead, negative. Unknown id.
			for _, e := range []int32{10, 12, -2} {
				resp = c.roundTrip(sessionFetch(v, topic, tp.ID(), id, e, nil)).(*kmsg.FetchResponse)
				if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 || resp.SessionID != 0 {
					t.Fatalf("epoch %d: error %d, session %d, %d topics; want INVALID_FETCH_SESSION_EPOCH", e, resp.ErrorCode, resp.SessionID, len(resp.Topics))
				}
			}
			for _, bad := range []int32{id + 1, 0} {
				resp = c.roundTrip(sessionFetch(v, topic, tp.ID(), bad, 11, nil)).(*kmsg.FetchResponse)
				if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || len(resp.Topics) != 0 {
					t.Fatalf("session %d: error %d, want FETCH_SESSION_ID_NOT_FOUND", bad, resp.ErrorCode)
				}
			}
			// The session survived the errors: epoch 11 is still next.
			fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 11, nil))

			// (id, 0) closes it and opens another.
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id, 0, map[int32]int64{0: 1, 1: 1}))
			id2 := resp.SessionID
			if id2 <= 0 || id2 == id {
				t.Fatalf("(id, 0): new session %d (old %d)", id2, id)
			}
			if code := c.roundTrip(sessionFetch(v, topic, tp.ID(), id, 12, nil)).(*kmsg.FetchResponse).ErrorCode; code != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("replaced session: error %d, want FETCH_SESSION_ID_NOT_FOUND", code)
			}
			// (id, -1) closes it and answers sessionless.
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), id2, -1, map[int32]int64{0: 1}))
			if resp.SessionID != 0 {
				t.Fatalf("(id, -1): session %d, want 0", resp.SessionID)
			}
			wantListed(t, "(id, -1)", resp, "0:2") // the batch of offsets 0-1, whole
			if code := c.roundTrip(sessionFetch(v, topic, tp.ID(), id2, 1, nil)).(*kmsg.FetchResponse).ErrorCode; code != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("closed session: error %d, want FETCH_SESSION_ID_NOT_FOUND", code)
			}

			// Forgetting every partition ends the session.
			resp = fetchOK(t, c, sessionFetch(v, topic, tp.ID(), 0, 0, map[int32]int64{0: 1}))
			id3 := resp.SessionID
			req = sessionFetch(v, topic, tp.ID(), id3, 1, nil)
			forget(req, topic, tp.ID(), 0)
			resp = fetchOK(t, c, req)
			if resp.SessionID != 0 || len(resp.Topics) != 0 {
				t.Fatalf("emptied session: session %d, %d topics", resp.SessionID, len(resp.Topics))
			}
			if code := c.roundTrip(sessionFetch(v, topic, tp.ID(), id3, 2, nil)).(*kmsg.FetchResponse).ErrorCode; code != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("emptied session: error %d, want FETCH_SESSION_ID_NOT_FOUND", code)
			}
		})
	}
}

// TestFetchSessionTopics: an incremental request adds partitions of
// another topic; unknown topics (by name before v13, by ID from v13) are
// listed with their error every time; a session used across the v13
// boundary is FETCH_SESSION_TOPIC_ID_ERROR.
func TestFetchSessionTopics(t *testing.T) {
	_, b, addr := startServer(t)
	a, _ := b.CreateTopic(broker.CreateTopicRequest{Name: "ta", Partitions: 1})
	bt, _ := b.CreateTopic(broker.CreateTopicRequest{Name: "tb", Partitions: 1})
	c := dial(t, addr)
	produceTo(t, c, "tb", 0, 4)
	for _, v := range []int16{12, 13} {
		resp := fetchOK(t, c, sessionFetch(v, "ta", a.ID(), 0, 0, map[int32]int64{0: 0}))
		id := resp.SessionID
		// Add tb/0 and an unknown topic.
		req := sessionFetch(v, "tb", bt.ID(), id, 1, map[int32]int64{0: 0})
		ghost := sessionFetch(v, "ghost", [16]byte{9, 9}, 0, 0, map[int32]int64{0: 0})
		req.Topics = append(req.Topics, ghost.Topics...)
		resp = fetchOK(t, c, req)
		unknown := kerr.UnknownTopicOrPartition.Code
		if v >= 13 {
			unknown = kerr.UnknownTopicID.Code
		}
		wantListed(t, fmt.Sprintf("v%d: added", v), resp, "0:4", fmt.Sprintf("0:0!%d", unknown))
		if v < 13 && (resp.Topics[0].Topic != "tb" || resp.Topics[1].Topic != "ghost") {
			t.Fatalf("v%d: topics %q, %q", v, resp.Topics[0].Topic, resp.Topics[1].Topic)
		}
		if v >= 13 && (resp.Topics[0].TopicID != bt.ID() || resp.Topics[1].TopicID != [16]byte{9, 9}) {
			t.Fatalf("v%d: topic ids not echoed", v)
		}
		resp = fetchOK(t, c, sessionFetch(v, "tb", bt.ID(), id, 2, map[int32]int64{0: 4}))
		wantListed(t, fmt.Sprintf("v%d: ghost again", v), resp, fmt.Sprintf("0:0!%d", unknown))

		// The other side of the v13 boundary.
		other := int16(13)
		if v >= 13 {
			other = 12
		}
		resp = c.roundTrip(sessionFetch(other, "ta", a.ID(), id, 3, nil)).(*kmsg.FetchResponse)
		if resp.ErrorCode != kerr.FetchSessionTopicIDError.Code || len(resp.Topics) != 0 {
			t.Fatalf("v%d session at v%d: error %d, want FETCH_SESSION_TOPIC_ID_ERROR", v, other, resp.ErrorCode)
		}
	}
}

// TestFetchSessionRotation: a partition that returned records moves to the
// end of the session's order, so a response budget that fits one batch
// serves the partitions in turn instead of the first one forever.
func TestFetchSessionRotation(t *testing.T) {
	_, b, addr := startServer(t)
	tp, _ := b.CreateTopic(broker.CreateTopicRequest{Name: "rot", Partitions: 2})
	c := dial(t, addr)
	for range 3 {
		produceTo(t, c, "rot", 0, 1)
	}
	produceTo(t, c, "rot", 1, 1)
	full := sessionFetch(12, "rot", tp.ID(), 0, 0, map[int32]int64{0: 0, 1: 0})
	full.MaxBytes = 1 // one batch (obligatory), then nothing fits
	resp := fetchOK(t, c, full)
	wantListed(t, "full", resp, "0:1", "1:0")
	id := resp.SessionID
	// The session starts in request order: 0 is read first and returns
	// records, so it moves behind 1.
	req := sessionFetch(12, "rot", tp.ID(), id, 1, map[int32]int64{0: 1})
	req.MaxBytes = 1
	resp = fetchOK(t, c, req)
	wantListed(t, "second", resp, "0:1")
	// 1 is read first now: it gets the budget, 0 waits its turn.
	req = sessionFetch(12, "rot", tp.ID(), id, 2, map[int32]int64{0: 2})
	req.MaxBytes = 1
	resp = fetchOK(t, c, req)
	wantListed(t, "third", resp, "1:1")
	req = sessionFetch(12, "rot", tp.ID(), id, 3, map[int32]int64{1: 1})
	req.MaxBytes = 1
	resp = fetchOK(t, c, req)
	wantListed(t, "fourth", resp, "0:1")
}

// TestFetchSessionLongPoll: an incremental fetch with nothing to return
// waits for max_wait like a full one, and an append to any of its
// session's partitions (listed in the request or not) ends the wait.
func TestFetchSessionLongPoll(t *testing.T) {
	_, b, addr := startServer(t)
	tp, _ := b.CreateTopic(broker.CreateTopicRequest{Name: "poll", Partitions: 2})
	c := dial(t, addr)
	resp := fetchOK(t, c, sessionFetch(12, "poll", tp.ID(), 0, 0, map[int32]int64{0: 0, 1: 0}))
	id := resp.SessionID

	req := sessionFetch(12, "poll", tp.ID(), id, 1, nil)
	req.MinBytes, req.MaxWaitMillis = 1, 200
	start := time.Now()
	resp = fetchOK(t, c, req)
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("idle incremental fetch answered after %v, want about its 200 ms max wait", waited)
	}
	wantListed(t, "idle", resp)

	req = sessionFetch(12, "poll", tp.ID(), id, 2, nil)
	req.MinBytes, req.MaxWaitMillis = 1, 30_000
	corr := c.send(req)
	time.Sleep(50 * time.Millisecond)
	p := dial(t, addr)
	produceTo(t, p, "poll", 1, 2)
	resp = c.read(req, corr).(*kmsg.FetchResponse)
	wantListed(t, "woken", resp, "1:2")
}

// fakeClock is a settable clock for the cache's eviction rules.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time { return f.t }

// cacheSession is a session of n partitions of topic "t", for the cache
// tests.
func cacheSession(privileged bool, n int) *fetchSession {
	s := newFetchSession(privileged, false)
	for i := range n {
		s.upsert(sessionTopicKey{name: "t"}, int32(i), 0, 1, -1)
	}
	return s
}

// use is an incremental use of session id at its next epoch.
func use(t *testing.T, c *fetchSessionCache, id int32) {
	t.Helper()
	c.mu.Lock()
	s := c.sessions[id]
	c.mu.Unlock()
	if s == nil {
		t.Fatalf("session %d not in the cache", id)
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.SessionID, req.SessionEpoch = id, s.epoch
	if fc := c.newContext(req); fc.errorCode != 0 || fc.session != s {
		t.Fatalf("session %d: error %d", id, fc.errorCode)
	}
}

func has(c *fetchSessionCache, id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id] != nil
}

// TestFetchSessionCacheEviction checks Kafka's eviction rules: a full
// cache takes a new session only by evicting one idle longer than the
// eviction time, or an evictable one worth less (unprivileged before
// privileged, then fewer partitions); a session is evictable by anyone
// once older than the eviction time, and by a privileged (replica)
// session if it is unprivileged.
func TestFetchSessionCacheEviction(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	slots := 2
	c := newFetchSessionCache(func() int { return slots }, fetchSessionEviction, clock.now)

	a := c.create(cacheSession(false, 1))
	bID := c.create(cacheSession(false, 3))
	if a == 0 || bID == 0 || a == bID {
		t.Fatalf("ids %d, %d", a, bID)
	}
	if c.count.Load() != 2 || c.partitions.Load() != 4 {
		t.Fatalf("%d sessions, %d partitions; want 2, 4", c.count.Load(), c.partitions.Load())
	}
	// Full, nothing old enough: a bigger session does not get in.
	if id := c.create(cacheSession(false, 10)); id != 0 {
		t.Fatalf("full cache of new sessions took session %d", id)
	}
	// Both used after the eviction time: evictable, not idle.
	clock.t = clock.t.Add(fetchSessionEviction + time.Second)
	use(t, c, a)
	use(t, c, bID)
	clock.t = clock.t.Add(time.Second)
	// A new session of 2 partitions evicts the 1-partition one.
	cID := c.create(cacheSession(false, 2))
	if cID == 0 || has(c, a) || !has(c, bID) {
		t.Fatalf("2-partition session: id %d; a kept %v, b kept %v", cID, has(c, a), has(c, bID))
	}
	// One of a single partition is worth less than any evictable one.
	if id := c.create(cacheSession(false, 1)); id != 0 {
		t.Fatalf("1-partition session evicted a bigger one: %d", id)
	}
	if c.evictions.Load() != 1 {
		t.Fatalf("%d evictions, want 1", c.evictions.Load())
	}
	// A privileged session may evict a new unprivileged one...
	pID := c.create(cacheSession(true, 1))
	if pID == 0 || has(c, cID) {
		t.Fatalf("privileged session: id %d, c kept %v", pID, has(c, cID))
	}
	// ...but nobody evicts a new privileged one, nor a bigger old one.
	if id := c.create(cacheSession(false, 2)); id != 0 {
		t.Fatalf("unprivileged session got in: %d", id)
	}
	// Idle past the eviction time: the least recently used goes, whatever
	// its worth.
	clock.t = clock.t.Add(fetchSessionEviction / 2)
	use(t, c, pID)
	clock.t = clock.t.Add(fetchSessionEviction/2 + 2*time.Second)
	dID := c.create(cacheSession(false, 1))
	if dID == 0 || has(c, bID) || !has(c, pID) {
		t.Fatalf("after b idled: id %d, b kept %v, p kept %v", dID, has(c, bID), has(c, pID))
	}
	if c.evictions.Load() != 3 || c.count.Load() != 2 || c.partitions.Load() != 2 {
		t.Fatalf("%d evictions, %d sessions, %d partitions; want 3, 2, 2", c.evictions.Load(), c.count.Load(), c.partitions.Load())
	}
	// No slots: no sessions at all.
	slots = 0
	c.remove(dID)
	c.remove(pID)
	if id := c.create(cacheSession(false, 5)); id != 0 || c.count.Load() != 0 || c.partitions.Load() != 0 {
		t.Fatalf("zero slots: session %d, %d sessions, %d partitions", id, c.count.Load(), c.partitions.Load())
	}
}

// TestFetchSessionEpochWrap: the epoch after MaxInt32 is 1.
func TestFetchSessionEpochWrap(t *testing.T) {
	for in, want := range map[int32]int32{0: 1, 1: 2, 1<<31 - 1: 1, -1: -1, -5: -1} {
		if got := nextFetchEpoch(in); got != want {
			t.Errorf("nextFetchEpoch(%d) = %d, want %d", in, got, want)
		}
	}
}

// TestFetchSessionMustRespond: what puts a partition in an incremental
// response, and what the session remembers of it.
func TestFetchSessionMustRespond(t *testing.T) {
	base := broker.FetchResult{HighWatermark: 10, LastStableOffset: 10, LogStartOffset: 2, PreferredReadReplica: -1}
	cp := &cachedPartition{highWatermark: 10, lastStable: 10, logStart: 2}
	for _, tc := range []struct {
		name string
		mod  func(r *broker.FetchResult)
		want bool
	}{
		{"unchanged", func(*broker.FetchResult) {}, false},
		{"records", func(r *broker.FetchResult) { r.Records = []byte{1} }, true},
		{"high watermark", func(r *broker.FetchResult) { r.HighWatermark = 11 }, true},
		{"last stable offset", func(r *broker.FetchResult) { r.LastStableOffset = 9 }, true},
		{"log start offset", func(r *broker.FetchResult) { r.LogStartOffset = 3 }, true},
		{"preferred read replica", func(r *broker.FetchResult) { r.PreferredReadReplica = 2 }, true},
		{"error", func(r *broker.FetchResult) { r.Err = kerr.NotLeaderForPartition }, true},
	} {
		r := base
		tc.mod(&r)
		c := *cp
		if got := c.mustRespond(&r, false); got != tc.want {
			t.Errorf("%s: mustRespond %v, want %v", tc.name, got, tc.want)
		}
		if c != *cp {
			t.Errorf("%s: a check without update changed the partition", tc.name)
		}
	}
	c := *cp
	r := base
	r.Err = kerr.NotLeaderForPartition
	c.mustRespond(&r, true)
	if c.highWatermark != -1 {
		t.Fatalf("after an error the cached high watermark is %d, want -1", c.highWatermark)
	}
	if !c.mustRespond(&base, true) || c.mustRespond(&base, true) {
		t.Fatal("after an error the partition is listed once more, then not")
	}
}

// BenchmarkFetchSessionIdle is an idle consumer's fetch of 1,000
// partitions, from decode to encoded response, as a sessionless full
// fetch and as an incremental fetch of a session, both with nothing to
// return and no wait: the session lists no partition in the request or
// the response. allocs/op shows what the session's lookup costs per
// fetch (nothing per partition).
func BenchmarkFetchSessionIdle(b *testing.B) {
	const partitions = 1000
	s, br, _ := startServer(b)
	tp, err := br.CreateTopic(broker.CreateTopicRequest{Name: "idle", Partitions: partitions})
	if err != nil {
		b.Fatal(err)
	}
	offsets := make(map[int32]int64, partitions)
	for p := range int32(partitions) {
		offsets[p] = 0
	}
	for _, mode := range []string{"full", "incremental"} {
		b.Run(mode, func(b *testing.B) {
			c := benchConn(s)
			frame := func(req *kmsg.FetchRequest) []byte { return encodeRequest(req, 1)[4:] }
			if mode == "full" {
				f := frame(sessionFetch(13, "idle", tp.ID(), 0, -1, offsets))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if err := c.handle(f); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			if err := c.handle(frame(sessionFetch(13, "idle", tp.ID(), 0, 0, offsets))); err != nil {
				b.Fatal(err)
			}
			id := c.fetchResp.SessionID
			if id == 0 {
				b.Fatal("no session")
			}
			// Each epoch needs its own frame; built beforehand.
			frames := make([][]byte, b.N)
			for i := range frames {
				frames[i] = frame(sessionFetch(13, "idle", tp.ID(), id, nextEpochN(i+1), nil))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := c.handle(frames[i]); err != nil {
					b.Fatal(err)
				}
				if c.fetchResp.ErrorCode != 0 || len(c.fetchResp.Topics) != 0 {
					b.Fatalf("incremental fetch: error %d, %d topics", c.fetchResp.ErrorCode, len(c.fetchResp.Topics))
				}
			}
		})
	}
}

// nextEpochN is the session epoch of the n-th incremental fetch.
func nextEpochN(n int) int32 { return int32((n-1)%(1<<31-1)) + 1 }

// TestFetchSessionAuthorization: a session's topics are authorized on
// every fetch, not once when they join it: a topic the principal may not
// read is listed with TOPIC_AUTHORIZATION_FAILED each time, and once READ
// is granted the next incremental fetch lists it without the error.
func TestFetchSessionAuthorization(t *testing.T) {
	f := newAuthorizationFixture(t)
	seedACLs(t, f.b, grantTopic("payments", kmsg.ACLOperationRead))
	full := sessionFetch(12, "payments", [16]byte{}, 0, 0, map[int32]int64{0: 0})
	orders := sessionFetch(12, "orders", [16]byte{}, 0, 0, map[int32]int64{0: 0})
	full.Topics = append(full.Topics, orders.Topics...)
	resp := fetchOK(t, f.c, full)
	denied := fmt.Sprintf("0:0!%d", kerr.TopicAuthorizationFailed.Code)
	if got := listed(t, resp); len(got) != 2 || got[1] != denied || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("full: response lists %v, want payments and %s", got, denied)
	}
	id := resp.SessionID
	// payments' offset moves to its end: from now on nothing changes.
	req := sessionFetch(12, "payments", [16]byte{}, id, 1, map[int32]int64{0: resp.Topics[0].Partitions[0].HighWatermark})
	resp = fetchOK(t, f.c, req)
	wantListed(t, "incremental, orders denied", resp, denied)
	seedACLs(t, f.b, grantTopic("orders", kmsg.ACLOperationRead))
	resp = fetchOK(t, f.c, sessionFetch(12, "", [16]byte{}, id, 2, nil))
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "orders" || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("incremental, orders granted: response lists %v, want orders without an error", listed(t, resp))
	}
}

// TestFetchSessionSweepIdle: a session nobody fetched with for a minute
// leaves its partitions' waiters (appends stop signalling it) but stays
// cached; its next long poll registers again and is woken as before.
func TestFetchSessionSweepIdle(t *testing.T) {
	s, b, addr := startServer(t)
	tp, _ := b.CreateTopic(broker.CreateTopicRequest{Name: "sweep", Partitions: 2})
	c := dial(t, addr)
	id := fetchOK(t, c, sessionFetch(12, "sweep", tp.ID(), 0, 0, map[int32]int64{0: 0, 1: 0})).SessionID
	req := sessionFetch(12, "sweep", tp.ID(), id, 1, nil)
	req.MinBytes, req.MaxWaitMillis = 1, 10
	fetchOK(t, c, req)
	s.fetchSessions.mu.Lock()
	sess := s.fetchSessions.sessions[id]
	s.fetchSessions.mu.Unlock()

	s.fetchSessions.sweepIdle(time.Now())
	if !sessionRegistered(sess) {
		t.Fatal("a session used just now was released")
	}
	s.fetchSessions.sweepIdle(time.Now().Add(fetchSessionIdleRelease + time.Second))
	if sessionRegistered(sess) {
		t.Fatal("an idle session's waiter is still registered")
	}
	req = sessionFetch(12, "sweep", tp.ID(), id, 2, nil)
	req.MinBytes, req.MaxWaitMillis = 1, 30_000
	corr := c.send(req)
	time.Sleep(50 * time.Millisecond)
	produceTo(t, dial(t, addr), "sweep", 1, 1)
	wantListed(t, "woken after a sweep", c.read(req, corr).(*kmsg.FetchResponse), "1:1")
}

// sessionRegistered reports whether the session's waiter is registered
// with any partition: released, it wakes on nothing.
func sessionRegistered(s *fetchSession) bool {
	return s.waiter.Registered() > 0
}
