package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log/logtest"
)

type oflePartition struct {
	topic                     string
	partition                 int32
	currentEpoch, leaderEpoch int32
}

func offsetForLeaderEpochRequest(version int16, replicaID int32, parts ...oflePartition) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(version)
	req.ReplicaID = replicaID
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.partition, p.currentEpoch, p.leaderEpoch
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// TestOffsetForLeaderEpoch checks every served version against a
// partition whose epoch is learnt as a consumer learns it: from the
// partitionLeaderEpoch of the batches it fetched and from Metadata.
func TestOffsetForLeaderEpoch(t *testing.T) {
	_, b, addr := startServer(t)
	tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: "ofle", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	for range 2 {
		resp := c.roundTrip(produceRequest(9, -1, "ofle", logtest.Batch{Records: 3}.Encode())).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce: error %d", code)
		}
	}
	fresp := c.roundTrip(fetchRequest(13, "", tp.ID(), 0, 1<<20)).(*kmsg.FetchResponse)
	fp := fresp.Topics[0].Partitions[0]
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(fp.RecordBatches); err != nil || fp.ErrorCode != 0 {
		t.Fatalf("fetch: error %d, batch %v", fp.ErrorCode, err)
	}
	epoch, logEnd := rb.PartitionLeaderEpoch, fp.HighWatermark
	if epoch < 0 || logEnd != 6 {
		t.Fatalf("fetched batch epoch %d, high watermark %d", epoch, logEnd)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.SetVersion(12)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("ofle")
	mreq.Topics = append(mreq.Topics, mt)
	mresp := c.roundTrip(mreq).(*kmsg.MetadataResponse)
	current := mresp.Topics[0].Partitions[0].LeaderEpoch
	t.Logf("batches written in epoch %d, current epoch %d, log end %d", epoch, current, logEnd)
	if current < epoch {
		t.Fatalf("metadata leader epoch %d is older than the batches' %d", current, epoch)
	}

	type want struct {
		code  *kerr.Error
		epoch int32
		end   int64
	}
	cases := []struct {
		name string
		req  oflePartition
		want want
	}{
		{"latest epoch ends at the log end", oflePartition{"ofle", 0, -1, epoch}, want{nil, epoch, logEnd}},
		{"with the current epoch checked", oflePartition{"ofle", 0, current, epoch}, want{nil, epoch, logEnd}},
		{"undefined epoch", oflePartition{"ofle", 0, -1, -1}, want{nil, -1, -1}},
		{"epoch newer than the log", oflePartition{"ofle", 0, -1, current + 1}, want{nil, -1, -1}},
		{"newer current epoch", oflePartition{"ofle", 0, current + 1, epoch}, want{kerr.UnknownLeaderEpoch, -1, -1}},
		{"unknown partition", oflePartition{"ofle", 1, -1, epoch}, want{kerr.UnknownTopicOrPartition, -1, -1}},
	}
	if current > 0 {
		cases = append(cases, struct {
			name string
			req  oflePartition
			want want
		}{"older current epoch", oflePartition{"ofle", 0, current - 1, epoch}, want{kerr.FencedLeaderEpoch, -1, -1}})
	}
	cases = append(cases, struct {
		name string
		req  oflePartition
		want want
	}{"unknown topic", oflePartition{"nope", 0, -1, epoch}, want{kerr.UnknownTopicOrPartition, -1, -1}})
	var parts []oflePartition
	for _, tc := range cases {
		parts = append(parts, tc.req)
	}

	for v := int16(2); v <= 4; v++ {
		replicas := []int32{-1}
		if v >= 3 {
			// A debugging tool and a broker id are answered like a
			// consumer, as in Kafka.
			replicas = append(replicas, -2, 1)
		}
		for _, replica := range replicas {
			resp := c.roundTrip(offsetForLeaderEpochRequest(v, replica, parts...)).(*kmsg.OffsetForLeaderEpochResponse)
			if resp.GetVersion() != v || resp.ThrottleMillis != 0 {
				t.Fatalf("v%d: answered v%d throttle %d", v, resp.GetVersion(), resp.ThrottleMillis)
			}
			var got []kmsg.OffsetForLeaderEpochResponseTopicPartition
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					got = append(got, rp)
					if len(got) <= len(cases) && cases[len(got)-1].req.topic != rt.Topic {
						t.Fatalf("v%d: topic %q in place of %q", v, rt.Topic, cases[len(got)-1].req.topic)
					}
				}
			}
			if len(got) != len(cases) {
				t.Fatalf("v%d: %d partitions answered, want %d", v, len(got), len(cases))
			}
			for i, tc := range cases {
				wantCode := int16(0)
				if tc.want.code != nil {
					wantCode = tc.want.code.Code
				}
				g := got[i]
				if g.Partition != tc.req.partition || g.ErrorCode != wantCode || g.LeaderEpoch != tc.want.epoch || g.EndOffset != tc.want.end {
					t.Errorf("v%d replica %d, %s: partition %d error %d epoch %d end %d, want partition %d error %d epoch %d end %d",
						v, replica, tc.name, g.Partition, g.ErrorCode, g.LeaderEpoch, g.EndOffset,
						tc.req.partition, wantCode, tc.want.epoch, tc.want.end)
				}
			}
		}
	}
}

// TestOffsetForLeaderEpochOldVersionsNotServed: v0 and v1 are not
// advertised, as in Kafka 4.
func TestOffsetForLeaderEpochOldVersionsNotServed(t *testing.T) {
	s, _, _ := startServer(t)
	a, ok := s.apis.lookup(23)
	if !ok || a.min != 2 || a.max != 4 {
		t.Fatalf("OffsetForLeaderEpoch served %v: v%d-v%d, want v2-v4", ok, a.min, a.max)
	}
}
