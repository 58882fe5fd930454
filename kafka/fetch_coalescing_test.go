package kafka

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/coalescer"
	"github.com/weir-broker/weir/log/logtest"
)

// fetchFrames sends each request on conn and returns the response bodies
// after the correlation id.
func fetchFrames(t *testing.T, c *rawConn, reqs []*kmsg.FetchRequest) [][]byte {
	t.Helper()
	out := make([][]byte, len(reqs))
	for i, req := range reqs {
		corr := c.send(req)
		got, body, err := c.readFrame()
		if err != nil || got != corr {
			t.Fatalf("fetch %d: corr %d (want %d), %v", i, got, corr, err)
		}
		out[i] = body
	}
	return out
}

func setCoalescing(t *testing.T, b *broker.Broker, on bool) {
	t.Helper()
	if err := b.AlterClusterProperties([]broker.PropertyChange{{Name: "kafka_fetch_read_coalescing_enabled", Value: fmt.Sprint(on)}}, false); err != nil {
		t.Fatal(err)
	}
}

// TestFetchCoalescingByteIdentical: with coalescing on, fetches answer
// exactly the bytes they answer with it off — every version, obligatory
// and strict limits, small (inline) and large (shared, writev) record
// sets, offsets inside and past the log — including N connections that
// fetch the same thing at once; and the coalescer accounts for every read
// it served.
func TestFetchCoalescingByteIdentical(t *testing.T) {
	_, b, addr := startServer(t)
	tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: "fanout", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	for _, batch := range []logtest.Batch{
		{Records: 1, ValueSize: 10}, {Records: 3, ValueSize: 2000}, {Records: 1, ValueSize: 100}, {Records: 10, ValueSize: 700},
	} {
		resp := c.roundTrip(produceRequest(9, -1, "fanout", batch.Encode())).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce: error %d", code)
		}
	}
	var reqs []*kmsg.FetchRequest
	for _, v := range []int16{4, 11, 12, 13, 16} {
		for _, offset := range []int64{0, 1, 4, 5, 15, 99} {
			for _, maxBytes := range []int32{1, 200, 5000, 1 << 20} {
				reqs = append(reqs, fetchRequest(v, "fanout", tp.ID(), offset, maxBytes))
			}
		}
	}

	off := fetchFrames(t, c, reqs)
	setCoalescing(t, b, true)
	before := coalescer.SumStats(b.CoalescerStats())
	on := fetchFrames(t, c, reqs)
	for i := range reqs {
		if !bytes.Equal(off[i], on[i]) {
			t.Fatalf("request %d (v%d offset %d max %d): coalesced answer differs", i, reqs[i].Version,
				reqs[i].Topics[0].Partitions[0].FetchOffset, reqs[i].MaxBytes)
		}
	}

	// Fan-out: many connections ask the same at once.
	const conns = 16
	var wg sync.WaitGroup
	answers := make([][][]byte, conns)
	for i := range conns {
		cc := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = fetchFrames(t, cc, reqs)
		}()
	}
	wg.Wait()
	for i := range conns {
		for j := range reqs {
			if !bytes.Equal(answers[i][j], off[j]) {
				t.Fatalf("connection %d request %d: coalesced answer differs", i, j)
			}
		}
	}

	// Every partition read that reached the log went through the
	// coalescer: each is an insertion, a reinsertion or a hit. Reads past
	// the end of the log answer without a read.
	after := coalescer.SumStats(b.CoalescerStats())
	reads := after.Insertions + after.Reinsertions + after.ReadyHits + after.InflightHits -
		(before.Insertions + before.Reinsertions + before.ReadyHits + before.InflightHits)
	if reads == 0 || reads > uint64((conns+1)*len(reqs)) {
		t.Fatalf("coalescer counted %d reads for %d fetches", reads, (conns+1)*len(reqs))
	}
	t.Logf("%d fetches: %+v", (conns+1)*len(reqs), after)

	// Off again: the cache is dropped, answers unchanged.
	setCoalescing(t, b, false)
	again := fetchFrames(t, c, reqs)
	for i := range reqs {
		if !bytes.Equal(off[i], again[i]) {
			t.Fatalf("request %d: answer after disabling differs", i)
		}
	}
}
