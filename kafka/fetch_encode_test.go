package kafka

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// randomFetchResponse builds a response with every field weir sets, in
// the shapes a fetch produces: errors, hints, brokers, empty and large
// record sets.
func randomFetchResponse(rng *rand.Rand, version int16) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	resp.ThrottleMillis = rng.Int32N(100)
	resp.ErrorCode = int16(rng.IntN(3))
	resp.SessionID = rng.Int32()
	for range rng.IntN(4) {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = string(bytes.Repeat([]byte{'t'}, 1+rng.IntN(20)))
		for i := range t.TopicID {
			t.TopicID[i] = byte(rng.UintN(256))
		}
		for range rng.IntN(5) {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rng.Int32N(1000)
			p.ErrorCode = int16(rng.IntN(2) * 6)
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int64N(1<<40), rng.Int64N(1<<40), rng.Int64N(1<<40)
			switch rng.IntN(3) {
			case 0:
				p.AbortedTransactions = nil
			case 1:
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			default:
				for range 1 + rng.IntN(3) {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = rng.Int64(), rng.Int64()
					p.AbortedTransactions = append(p.AbortedTransactions, a)
				}
			}
			p.PreferredReadReplica = rng.Int32N(5) - 1
			sizes := []int{0, 1, inlineRecordBytes - 1, inlineRecordBytes, 70_000}
			p.RecordBatches = make([]byte, sizes[rng.IntN(len(sizes))])
			for i := range p.RecordBatches {
				p.RecordBatches[i] = byte(i * 7)
			}
			if rng.IntN(3) == 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = rng.Int32N(5), rng.Int32N(50)
			}
			if rng.IntN(5) == 0 {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = rng.Int32N(50), rng.Int64N(1000)
			}
			if rng.IntN(5) == 0 {
				p.SnapshotID.Epoch, p.SnapshotID.EndOffset = rng.Int32N(50), rng.Int64N(1000)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	for i := range rng.IntN(3) {
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port = int32(i), "broker-host", 9092+int32(i)
		if rng.IntN(2) == 0 {
			rack := "rack-a"
			b.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp
}

// TestFetchEncoderMatchesKmsg: the vectored encoder writes exactly the
// bytes kmsg does, for every version weir serves.
func TestFetchEncoderMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var e fetchEncoder
	for version := int16(4); version <= 18; version++ {
		for range 200 {
			resp := randomFetchResponse(rng, version)
			want := resp.AppendTo(nil)
			e.reset(nil)
			e.encode(resp)
			pieces := e.finish()
			var got []byte
			for _, b := range pieces {
				got = append(got, b...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("v%d: encoder differs from kmsg (%d vs %d bytes)", version, len(got), len(want))
			}
			// The large record sets are sent from their own buffers.
			for _, tp := range resp.Topics {
				for _, p := range tp.Partitions {
					if len(p.RecordBatches) < inlineRecordBytes {
						continue
					}
					shared := false
					for _, b := range pieces {
						shared = shared || (len(b) > 0 && &b[0] == &p.RecordBatches[0])
					}
					if !shared {
						t.Fatalf("v%d: a %d-byte record set was copied", version, len(p.RecordBatches))
					}
				}
			}
		}
	}
}
