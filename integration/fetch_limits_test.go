package integration

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ---------------------------------------------------------------------------
// Raw fetch helpers.

type fetchPart struct {
	Topic     string
	TopicID   [16]byte // used for v13+
	Partition int32
	Offset    int64
	MaxBytes  int32
}

type fetchSpec struct {
	MaxWaitMs int32
	MinBytes  int32
	MaxBytes  int32
	Isolation int8
	Parts     []fetchPart
}

func (p fetchPart) key(v int16) string {
	if v >= 13 {
		return fmt.Sprintf("%x/%d", p.TopicID, p.Partition)
	}
	return fmt.Sprintf("%s/%d", p.Topic, p.Partition)
}

func buildFetch(v int16, s fetchSpec) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.ReplicaID = -1
	req.MaxWaitMillis = s.MaxWaitMs
	req.MinBytes = s.MinBytes
	req.MaxBytes = s.MaxBytes
	req.IsolationLevel = s.Isolation
	req.SessionID = 0
	req.SessionEpoch = -1 // full fetch, no session
	for _, p := range s.Parts {
		sameTopic := false
		if n := len(req.Topics); n > 0 {
			last := req.Topics[n-1]
			sameTopic = (v >= 13 && last.TopicID == p.TopicID) || (v < 13 && last.Topic == p.Topic)
		}
		if !sameTopic {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = p.Topic
			rt.TopicID = p.TopicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.Partition
		rp.FetchOffset = p.Offset
		rp.CurrentLeaderEpoch = -1
		rp.LastFetchedEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = p.MaxBytes
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// fetchV sends one fetch at version v on rc and returns the response,
// failing on a top-level error.
func fetchV(t testing.TB, rc *rawConn, v int16, s fetchSpec) *kmsg.FetchResponse {
	t.Helper()
	resp := rc.Do(buildFetch(v, s)).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch v%d: top-level error %d", v, resp.ErrorCode)
	}
	return resp
}

type flatPart struct {
	key string
	p   kmsg.FetchResponseTopicPartition
}

func flatten(v int16, resp *kmsg.FetchResponse) []flatPart {
	var out []flatPart
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			var k string
			if v >= 13 {
				k = fmt.Sprintf("%x/%d", rt.TopicID, p.Partition)
			} else {
				k = fmt.Sprintf("%s/%d", rt.Topic, p.Partition)
			}
			out = append(out, flatPart{k, p})
		}
	}
	return out
}

func onlyPartition(t testing.TB, resp *kmsg.FetchResponse, topic string, partition int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response for %s/%d has %d topics: %+v", topic, partition, len(resp.Topics), resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if p.Partition != partition {
		t.Fatalf("fetch response partition %d, want %d", p.Partition, partition)
	}
	return p
}

// topicIDOf returns the topic ID from Metadata (v10+).
func topicIDOf(t testing.TB, b *Broker, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := b.RawRequest(t, req).(*kmsg.MetadataResponse)
	if resp.Version < 10 {
		t.Fatalf("Metadata negotiated v%d; topic IDs need v10+", resp.Version)
	}
	for _, mt := range resp.Topics {
		if derefStr(mt.Topic) == topic {
			if mt.ErrorCode != 0 {
				t.Fatalf("metadata for %s: error %d", topic, mt.ErrorCode)
			}
			if mt.TopicID == ([16]byte{}) {
				t.Fatalf("metadata v%d for %s: zero topic ID", resp.Version, topic)
			}
			return mt.TopicID
		}
	}
	t.Fatalf("metadata has no topic %s", topic)
	return [16]byte{}
}

// ---------------------------------------------------------------------------
// KIP-74 fixture: 3 partitions, each with 5 uncompressed batches of 10
// records (offsets 0..49).

const (
	k74Topic       = "kip74"
	k74Partitions  = 3
	k74Batches     = 5
	k74PerBatch    = 10
	k74HWM         = k74Batches * k74PerBatch
	k74ValueLength = 100
)

func k74Value(p int32, off int) []byte {
	v := fmt.Appendf(nil, "p%d-o%04d-", p, off)
	return append(v, bytes.Repeat([]byte{'x'}, k74ValueLength-len(v))...)
}

type k74Fixture struct {
	b     *Broker
	id    [16]byte
	sizes [k74Partitions][k74Batches]int // stored batch sizes
}

func setupK74(t *testing.T, b *Broker, vers map[int16][2]int16) *k74Fixture {
	CreateTopic(t, b, k74Topic, k74Partitions, nil)
	rc := dialRaw(t, b.KafkaAddr)
	pv := produceVersion(t, vers)
	for p := range int32(k74Partitions) {
		for bi := range k74Batches {
			var recs []rec
			for i := range k74PerBatch {
				off := bi*k74PerBatch + i
				recs = append(recs, rec{Key: fmt.Appendf(nil, "k%04d", off), Value: k74Value(p, off), TsDelta: int64(i)})
			}
			pr := produceRaw(t, rc, pv, -1, k74Topic, p, buildBatch(batchOpts{}, recs))
			if pr.ErrorCode != 0 || pr.BaseOffset != int64(bi*k74PerBatch) {
				t.Fatalf("produce batch %d to %s/%d: error %d base offset %d, want 0 and %d", bi, k74Topic, p, pr.ErrorCode, pr.BaseOffset, bi*k74PerBatch)
			}
		}
	}
	f := &k74Fixture{b: b, id: topicIDOf(t, b, k74Topic)}
	// Measure stored batch sizes with an unconstrained fetch.
	for p := range int32(k74Partitions) {
		resp := fetchV(t, rc, 11, fetchSpec{MaxBytes: 50 << 20, Parts: []fetchPart{{Topic: k74Topic, Partition: p, MaxBytes: 10 << 20}}})
		fp := onlyPartition(t, resp, k74Topic, p)
		batches, partial := splitBatches(t, fp.RecordBatches)
		if fp.ErrorCode != 0 || len(batches) != k74Batches || partial != 0 {
			t.Fatalf("unconstrained fetch of %s/%d: error %d, %d whole batches, %d partial bytes; want 0, %d, 0", k74Topic, p, fp.ErrorCode, len(batches), partial, k74Batches)
		}
		for i, raw := range batches {
			rb := parseBatch(t, raw)
			if rb.FirstOffset != int64(i*k74PerBatch) || rb.NumRecords != k74PerBatch {
				t.Fatalf("%s/%d batch %d: first offset %d with %d records", k74Topic, p, i, rb.FirstOffset, rb.NumRecords)
			}
			for _, r := range decodeUncompressed(t, rb) {
				if !bytes.Equal(r.Value, k74Value(p, int(r.Offset))) {
					t.Fatalf("%s/%d offset %d: value %q", k74Topic, p, r.Offset, r.Value)
				}
			}
			f.sizes[p][i] = len(raw)
		}
	}
	return f
}

func (f *k74Fixture) S() int32 { return int32(f.sizes[0][0]) }

// batchesFrom returns the stored batch sizes of partition p from offset.
func (f *k74Fixture) batchesFrom(p int32, offset int64) []int {
	if offset >= k74HWM {
		return nil
	}
	return f.sizes[p][offset/k74PerBatch:]
}

// checkKIP74 verifies resp against the KIP-74 rules for the request:
// partitions listed in request order, all present with HWM; for each, the
// limit is min(partition_max_bytes, what is left of max_bytes); whole
// batches up to the limit are returned (a trailing partial batch within the
// limit is tolerated, as Kafka sends one); only while no earlier partition
// returned data may a partition exceed the limit, and then by exactly one
// whole batch.
func (f *k74Fixture) checkKIP74(t *testing.T, v int16, s fetchSpec, resp *kmsg.FetchResponse) {
	t.Helper()
	got := flatten(v, resp)
	if len(got) != len(s.Parts) {
		keys := make([]string, len(got))
		for i, g := range got {
			keys[i] = g.key
		}
		t.Fatalf("fetch v%d: response lists %d partitions %v, request had %d", v, len(got), keys, len(s.Parts))
	}
	remaining := int64(s.MaxBytes)
	minOne := true
	total := 0
	for i, rp := range s.Parts {
		g := got[i]
		if g.key != rp.key(v) {
			t.Fatalf("fetch v%d: response position %d is %s, want %s (request order)", v, i, g.key, rp.key(v))
		}
		if g.p.ErrorCode != 0 {
			t.Fatalf("fetch v%d %s: error %d", v, g.key, g.p.ErrorCode)
		}
		if g.p.HighWatermark != k74HWM {
			t.Errorf("fetch v%d %s: high watermark %d, want %d", v, g.key, g.p.HighWatermark, k74HWM)
		}
		if v >= 5 && g.p.LogStartOffset != 0 {
			t.Errorf("fetch v%d %s: log start offset %d, want 0", v, g.key, g.p.LogStartOffset)
		}
		avail := f.batchesFrom(rp.Partition, rp.Offset)
		limit := min(int64(rp.MaxBytes), max(remaining, 0))
		batches, partial := splitBatches(t, g.p.RecordBatches)
		n := len(g.p.RecordBatches)
		total += n

		wantWhole := 0
		sum := int64(0)
		for _, sz := range avail {
			if sum+int64(sz) > limit {
				break
			}
			sum += int64(sz)
			wantWhole++
		}
		oversize := false
		if wantWhole == 0 && minOne && len(avail) > 0 {
			wantWhole, oversize = 1, true
		}
		if len(batches) != wantWhole {
			t.Errorf("fetch v%d %s (offset %d, partition_max_bytes %d, max_bytes left %d, first-with-data %v, batch size %d): %d whole batches (%d bytes), want %d",
				v, g.key, rp.Offset, rp.MaxBytes, remaining, minOne, f.S(), len(batches), n, wantWhole)
		}
		if oversize {
			if n != avail[0] || partial != 0 {
				t.Errorf("fetch v%d %s: first partition with data over its limit %d returned %d bytes (%d partial), want exactly one whole batch of %d", v, g.key, limit, n, partial, avail[0])
			}
		} else if int64(n) > limit {
			t.Errorf("fetch v%d %s: returned %d bytes, over its limit %d (partition_max_bytes %d, max_bytes left %d), and an earlier partition already returned data", v, g.key, n, limit, rp.MaxBytes, remaining)
		}
		for bi, raw := range batches {
			rb := parseBatch(t, raw)
			want := rp.Offset + int64(bi*k74PerBatch)
			if rb.FirstOffset != want {
				t.Errorf("fetch v%d %s: batch %d first offset %d, want %d", v, g.key, bi, rb.FirstOffset, want)
			}
		}
		remaining -= int64(n)
		if n > 0 {
			minOne = false
		}
	}
	if int64(total) > int64(s.MaxBytes) {
		// Only allowed when the first partition with data returned one
		// batch larger than max_bytes on its own.
		if len(got) == 0 || !(total == firstDataBytes(got) && total > int(s.MaxBytes)) {
			t.Errorf("fetch v%d: %d record bytes in response, over max_bytes %d", v, total, s.MaxBytes)
		}
	}
}

func firstDataBytes(got []flatPart) int {
	for _, g := range got {
		if n := len(g.p.RecordBatches); n > 0 {
			return n
		}
	}
	return 0
}

// TestFetchKIP74 exercises partition_max_bytes and max_bytes at fetch v11
// (topic names), v13 and v18 (topic IDs).
func TestFetchKIP74(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	f := setupK74(t, b, vers)
	S := f.S()
	for p := range k74Partitions {
		for i := range k74Batches {
			if f.sizes[p][i] != int(S) {
				t.Fatalf("stored batch sizes differ (%v) although every produced batch had the same size", f.sizes)
			}
		}
	}
	t.Logf("stored batch size %d bytes", S)
	const big = 10 << 20

	parts := func(partMax int32, pos ...[2]int64) []fetchPart {
		var out []fetchPart
		for _, pp := range pos {
			out = append(out, fetchPart{Topic: k74Topic, TopicID: f.id, Partition: int32(pp[0]), Offset: pp[1], MaxBytes: partMax})
		}
		return out
	}
	all0 := [][2]int64{{0, 0}, {1, 0}, {2, 0}}
	cases := []struct {
		name string
		spec fetchSpec
		// explicit expectations on top of the generic model: record
		// bytes per response position.
		wantBytes []int
	}{
		{
			name:      "partition_max_bytes below one batch: first partition gets exactly one batch, later none",
			spec:      fetchSpec{MaxBytes: big, Parts: parts(S/2, all0...)},
			wantBytes: []int{int(S), 0, 0},
		},
		{
			name:      "first partition with data may exceed, even if not first in request",
			spec:      fetchSpec{MaxBytes: big, Parts: parts(S/2, [2]int64{0, k74HWM}, [2]int64{1, 0}, [2]int64{2, 0})},
			wantBytes: []int{0, int(S), 0},
		},
		{
			name:      "request order preserved",
			spec:      fetchSpec{MaxBytes: big, Parts: parts(S/2, [2]int64{2, 0}, [2]int64{0, 0}, [2]int64{1, 0})},
			wantBytes: []int{int(S), 0, 0},
		},
		{
			name: "max_bytes across partitions",
			spec: fetchSpec{MaxBytes: 2*S + S/2, Parts: parts(big, all0...)},
		},
		{
			name:      "max_bytes below one batch: one whole batch from the first partition",
			spec:      fetchSpec{MaxBytes: S / 2, Parts: parts(big, all0...)},
			wantBytes: []int{int(S), 0, 0},
		},
		{
			name: "partition_max_bytes strict for later partitions",
			spec: fetchSpec{MaxBytes: big, Parts: parts(S+S/2, all0...)},
		},
		{
			name: "partition_max_bytes exactly two batches",
			spec: fetchSpec{MaxBytes: big, Parts: parts(2*S, [2]int64{0, 10}, [2]int64{1, 20}, [2]int64{2, 40})},
		},
		{
			name:      "unconstrained",
			spec:      fetchSpec{MaxBytes: big, Parts: parts(big, all0...)},
			wantBytes: []int{k74Batches * int(S), k74Batches * int(S), k74Batches * int(S)},
		},
	}
	for _, v := range []int16{11, 13, 18} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			requireVersion(t, vers, 1, v)
			rc := dialRaw(t, b.KafkaAddr)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					resp := fetchV(t, rc, v, c.spec)
					f.checkKIP74(t, v, c.spec, resp)
					if c.wantBytes != nil {
						got := flatten(v, resp)
						for i, w := range c.wantBytes {
							if i < len(got) && len(got[i].p.RecordBatches) != w {
								t.Errorf("position %d (%s): %d record bytes, want %d", i, got[i].key, len(got[i].p.RecordBatches), w)
							}
						}
					}
				})
			}
		})
	}

	t.Run("v4 basic", func(t *testing.T) {
		requireVersion(t, vers, 1, 4)
		rc := dialRaw(t, b.KafkaAddr)
		spec := fetchSpec{MaxBytes: big, Parts: parts(S/2, all0...)}
		resp := fetchV(t, rc, 4, spec)
		f.checkKIP74(t, 4, spec, resp)
	})
}

// TestFetchErrors checks per-partition fetch errors.
func TestFetchErrors(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	f := setupK74(t, b, vers)
	rc := dialRaw(t, b.KafkaAddr)
	const big = 10 << 20

	t.Run("unknown topic name v11", func(t *testing.T) {
		spec := fetchSpec{MaxBytes: big, Parts: []fetchPart{
			{Topic: "no-such-topic", Partition: 0, MaxBytes: big},
			{Topic: k74Topic, Partition: 0, MaxBytes: big},
		}}
		got := flatten(11, fetchV(t, rc, 11, spec))
		if len(got) != 2 {
			t.Fatalf("response lists %d partitions, want 2", len(got))
		}
		if got[0].key != "no-such-topic/0" || got[0].p.ErrorCode != errUnknownTopicOrPartition {
			t.Errorf("unknown topic: %s error %d, want no-such-topic/0 error %d (UNKNOWN_TOPIC_OR_PARTITION)", got[0].key, got[0].p.ErrorCode, errUnknownTopicOrPartition)
		}
		if got[1].p.ErrorCode != 0 || len(got[1].p.RecordBatches) == 0 {
			t.Errorf("valid partition next to an unknown topic: error %d, %d bytes; want data", got[1].p.ErrorCode, len(got[1].p.RecordBatches))
		}
	})

	t.Run("unknown partition v11", func(t *testing.T) {
		spec := fetchSpec{MaxBytes: big, Parts: []fetchPart{{Topic: k74Topic, Partition: 7, MaxBytes: big}}}
		got := flatten(11, fetchV(t, rc, 11, spec))
		if len(got) != 1 || got[0].p.ErrorCode != errUnknownTopicOrPartition {
			t.Errorf("fetch %s/7: %+v, want error %d", k74Topic, got, errUnknownTopicOrPartition)
		}
	})

	t.Run("unknown topic ID v13", func(t *testing.T) {
		requireVersion(t, vers, 1, 13)
		var bogus [16]byte
		_, _ = rand.Read(bogus[:])
		spec := fetchSpec{MaxBytes: big, Parts: []fetchPart{
			{TopicID: bogus, Partition: 0, MaxBytes: big},
			{Topic: k74Topic, TopicID: f.id, Partition: 1, MaxBytes: big},
		}}
		resp := rc.Do(buildFetch(13, spec)).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("top-level error %d, want the error on the partition (UNKNOWN_TOPIC_ID %d)", resp.ErrorCode, errUnknownTopicID)
		}
		got := flatten(13, resp)
		if len(got) != 2 {
			t.Fatalf("response lists %d partitions, want 2", len(got))
		}
		if got[0].key != fmt.Sprintf("%x/0", bogus) || got[0].p.ErrorCode != errUnknownTopicID {
			t.Errorf("unknown topic ID: %s error %d, want %x/0 error %d (UNKNOWN_TOPIC_ID)", got[0].key, got[0].p.ErrorCode, bogus, errUnknownTopicID)
		}
		if got[1].p.ErrorCode != 0 || len(got[1].p.RecordBatches) == 0 {
			t.Errorf("valid partition next to an unknown topic ID: error %d, %d bytes; want data", got[1].p.ErrorCode, len(got[1].p.RecordBatches))
		}
	})

	for _, v := range []int16{11, 13} {
		t.Run(fmt.Sprintf("offsets v%d", v), func(t *testing.T) {
			requireVersion(t, vers, 1, v)
			cases := []struct {
				offset  int64
				wantErr int16
			}{
				{k74HWM, 0}, // at the end: empty, no error
				{k74HWM + 1, errOffsetOutOfRange},
				{k74HWM + 1000, errOffsetOutOfRange},
				{-5, errOffsetOutOfRange},
			}
			for _, c := range cases {
				spec := fetchSpec{MaxBytes: big, Parts: []fetchPart{{Topic: k74Topic, TopicID: f.id, Partition: 2, Offset: c.offset, MaxBytes: big}}}
				got := flatten(v, fetchV(t, rc, v, spec))
				if len(got) != 1 {
					t.Fatalf("offset %d: %d partitions in response", c.offset, len(got))
				}
				p := got[0].p
				if p.ErrorCode != c.wantErr {
					t.Errorf("fetch offset %d (HWM %d): error %d, want %d", c.offset, k74HWM, p.ErrorCode, c.wantErr)
				}
				if len(p.RecordBatches) != 0 {
					t.Errorf("fetch offset %d (HWM %d): %d record bytes, want none", c.offset, k74HWM, len(p.RecordBatches))
				}
				if p.HighWatermark != k74HWM && c.wantErr == 0 {
					t.Errorf("fetch offset %d: HWM %d, want %d", c.offset, p.HighWatermark, k74HWM)
				}
			}
		})
	}
}

// TestFetchReadCommitted: with no transactions, read_committed sees the
// same data and LSO == HWM.
func TestFetchReadCommitted(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	f := setupK74(t, b, vers)
	rc := dialRaw(t, b.KafkaAddr)
	for _, v := range []int16{11, 13} {
		for _, iso := range []int8{0, 1} {
			spec := fetchSpec{MaxBytes: 10 << 20, Isolation: iso, Parts: []fetchPart{{Topic: k74Topic, TopicID: f.id, Partition: 1, MaxBytes: 10 << 20}}}
			got := flatten(v, fetchV(t, rc, v, spec))
			if len(got) != 1 {
				t.Fatalf("v%d isolation %d: %d partitions", v, iso, len(got))
			}
			p := got[0].p
			if p.ErrorCode != 0 || p.HighWatermark != k74HWM || p.LastStableOffset != k74HWM {
				t.Errorf("fetch v%d isolation %d: error %d HWM %d LSO %d, want 0, %d, %d", v, iso, p.ErrorCode, p.HighWatermark, p.LastStableOffset, k74HWM, k74HWM)
			}
			if len(p.AbortedTransactions) != 0 {
				t.Errorf("fetch v%d isolation %d: %d aborted transactions, want none", v, iso, len(p.AbortedTransactions))
			}
			batches, _ := splitBatches(t, p.RecordBatches)
			if len(batches) != k74Batches {
				t.Errorf("fetch v%d isolation %d: %d batches, want %d", v, iso, len(batches), k74Batches)
			}
		}
	}
	for _, iso := range []int8{0, 1} {
		off, _, ec := listOffsetRaw(t, b, k74Topic, 1, -1, iso)
		if ec != 0 || off != k74HWM {
			t.Errorf("ListOffsets latest isolation %d: offset %d error %d, want %d", iso, off, ec, k74HWM)
		}
	}
}

// TestFetchLongPoll: a fetch waiting at the end offset (min_bytes=1,
// max_wait=5000) is woken by a produce from another connection and returns
// the new data before max_wait; with nothing produced it waits and returns
// empty.
func TestFetchLongPoll(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	const topic = "longpoll"
	CreateTopic(t, b, topic, 2, nil)
	pv := produceVersion(t, vers)
	prodConn := dialRaw(t, b.KafkaAddr)
	first := produceRaw(t, prodConn, pv, -1, topic, 0, buildBatch(batchOpts{}, []rec{{Value: []byte("before")}}))
	if first.ErrorCode != 0 {
		t.Fatalf("produce: error %d", first.ErrorCode)
	}
	id := topicIDOf(t, b, topic)

	for _, v := range []int16{11, 13} {
		t.Run(fmt.Sprintf("woken v%d", v), func(t *testing.T) {
			requireVersion(t, vers, 1, v)
			off, _, _ := listOffsetRaw(t, b, topic, 0, -1, 0)
			fc := dialRaw(t, b.KafkaAddr)
			spec := fetchSpec{MaxWaitMs: 5000, MinBytes: 1, MaxBytes: 1 << 20, Parts: []fetchPart{{Topic: topic, TopicID: id, Partition: 0, Offset: off, MaxBytes: 1 << 20}}}
			req := buildFetch(v, spec)
			sent := time.Now()
			corr := fc.Send(req)
			// Give the fetch time to park, then produce from another
			// connection.
			time.Sleep(300 * time.Millisecond)
			val := fmt.Appendf(nil, "wake-v%d", v)
			pr := produceRaw(t, prodConn, pv, -1, topic, 0, buildBatch(batchOpts{}, []rec{{Value: val}}))
			if pr.ErrorCode != 0 || pr.BaseOffset != off {
				t.Fatalf("produce while polling: error %d offset %d, want 0 and %d", pr.ErrorCode, pr.BaseOffset, off)
			}
			// Bounded: the read deadline is 10 s, twice max_wait.
			resp := fc.Recv(req, corr, v, 10*time.Second).(*kmsg.FetchResponse)
			elapsed := time.Since(sent)
			got := flatten(v, resp)
			if len(got) != 1 || got[0].p.ErrorCode != 0 {
				t.Fatalf("long poll response: %+v", got)
			}
			batches, _ := splitBatches(t, got[0].p.RecordBatches)
			if len(batches) == 0 {
				t.Fatalf("long poll returned after %v without data (the produce at offset %d did not satisfy min_bytes=1)", elapsed.Round(time.Millisecond), off)
			}
			recs := decodeUncompressed(t, parseBatch(t, batches[0]))
			if len(recs) == 0 || recs[0].Offset != off || !bytes.Equal(recs[0].Value, val) {
				t.Fatalf("long poll returned %+v, want offset %d value %q", recs, off, val)
			}
			if elapsed >= 4500*time.Millisecond {
				t.Errorf("long poll returned data after %v: the produce did not wake it (max_wait 5000 ms elapsed)", elapsed.Round(time.Millisecond))
			}
		})
	}

	t.Run("max_wait expires without data", func(t *testing.T) {
		fc := dialRaw(t, b.KafkaAddr)
		spec := fetchSpec{MaxWaitMs: 600, MinBytes: 1, MaxBytes: 1 << 20, Parts: []fetchPart{{Topic: topic, Partition: 1, Offset: 0, MaxBytes: 1 << 20}}}
		req := buildFetch(11, spec)
		sent := time.Now()
		corr := fc.Send(req)
		resp := fc.Recv(req, corr, 11, 10*time.Second).(*kmsg.FetchResponse)
		elapsed := time.Since(sent)
		got := flatten(11, resp)
		if len(got) != 1 || got[0].p.ErrorCode != 0 || len(got[0].p.RecordBatches) != 0 {
			t.Fatalf("empty long poll: %+v", got)
		}
		if elapsed < 400*time.Millisecond {
			t.Errorf("fetch with min_bytes=1 max_wait=600 on an empty partition returned after %v: it did not wait", elapsed.Round(time.Millisecond))
		}
	})
}

// TestFetchMinBytesAccumulates: a long poll over two partitions with
// min_bytes larger than one batch is not answered by the first produce; it
// is answered once the second produce (another partition) brings enough
// bytes, and carries both.
func TestFetchMinBytesAccumulates(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	const topic = "minbytes"
	CreateTopic(t, b, topic, 2, nil)
	pv := produceVersion(t, vers)
	pc := dialRaw(t, b.KafkaAddr)
	batch := func(v string) []byte {
		return buildBatch(batchOpts{}, []rec{{Value: append([]byte(v), bytes.Repeat([]byte{'m'}, 200)...)}})
	}
	one := len(batch("p0"))

	fc := dialRaw(t, b.KafkaAddr)
	spec := fetchSpec{MaxWaitMs: 8000, MinBytes: int32(one + one/2), MaxBytes: 1 << 20, Parts: []fetchPart{
		{Topic: topic, Partition: 0, MaxBytes: 1 << 20},
		{Topic: topic, Partition: 1, MaxBytes: 1 << 20},
	}}
	req := buildFetch(11, spec)
	sent := time.Now()
	corr := fc.Send(req)
	time.Sleep(300 * time.Millisecond)
	if r := produceRaw(t, pc, pv, -1, topic, 0, batch("p0")); r.ErrorCode != 0 {
		t.Fatalf("produce p0: %d", r.ErrorCode)
	}
	// The fetch must still be parked: one batch is below min_bytes.
	if fr, err := fc.ReadFrame(700 * time.Millisecond); err == nil {
		resp, perr := parseResponse(req, fr, corr, 11)
		if perr != nil {
			t.Fatal(perr)
		}
		n := 0
		for _, g := range flatten(11, resp.(*kmsg.FetchResponse)) {
			n += len(g.p.RecordBatches)
		}
		t.Fatalf("fetch with min_bytes=%d answered after %v with %d record bytes, after one %d-byte batch (below min_bytes, max_wait 8000 not elapsed)",
			spec.MinBytes, time.Since(sent).Round(time.Millisecond), n, one)
	}
	if r := produceRaw(t, pc, pv, -1, topic, 1, batch("p1")); r.ErrorCode != 0 {
		t.Fatalf("produce p1: %d", r.ErrorCode)
	}
	resp := fc.Recv(req, corr, 11, 15*time.Second).(*kmsg.FetchResponse)
	elapsed := time.Since(sent)
	got := flatten(11, resp)
	if len(got) != 2 || len(got[0].p.RecordBatches) == 0 || len(got[1].p.RecordBatches) == 0 {
		t.Fatalf("fetch after both produces: %+v, want data from both partitions", got)
	}
	if elapsed >= 7500*time.Millisecond {
		t.Errorf("fetch answered after %v: the second produce did not wake it", elapsed.Round(time.Millisecond))
	}
}

// TestFetchMaxBytesClusterCap: cluster.fetch_max_bytes caps what a fetch
// returns even when the client asks for more.
func TestFetchMaxBytesClusterCap(t *testing.T) {
	b := StartBroker(t, WithSet("cluster.fetch_max_bytes", "4096"))
	vers := apiVersions(t, b.KafkaAddr)
	const topic = "fetchcap"
	CreateTopic(t, b, topic, 1, nil)
	pv := produceVersion(t, vers)
	rc := dialRaw(t, b.KafkaAddr)
	var size int
	for i := range 10 {
		bt := buildBatch(batchOpts{}, []rec{{Value: bytes.Repeat([]byte{byte('a' + i)}, 1000)}})
		size = len(bt)
		if r := produceRaw(t, rc, pv, -1, topic, 0, bt); r.ErrorCode != 0 {
			t.Fatalf("produce: %d", r.ErrorCode)
		}
	}
	resp := fetchV(t, rc, 11, fetchSpec{MaxBytes: 50 << 20, Parts: []fetchPart{{Topic: topic, Partition: 0, MaxBytes: 50 << 20}}})
	p := onlyPartition(t, resp, topic, 0)
	batches, _ := splitBatches(t, p.RecordBatches)
	if len(p.RecordBatches) > 4096 || len(batches) != 4096/size {
		t.Errorf("fetch asking for 50 MiB with fetch_max_bytes=4096: %d bytes in %d whole batches of %d, want at most 4096 bytes (%d whole batches)", len(p.RecordBatches), len(batches), size, 4096/size)
	}
}
