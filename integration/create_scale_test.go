package integration

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreateTopicsTimeoutAndDeparture creates topics of hundreds of
// replicated partitions the ways a client can walk away from them: with a
// timeout far shorter than the work (the answer is REQUEST_TIMED_OUT, as
// Kafka's, and the creation carries on), and by closing the connection
// right after sending the request. Either way every partition ends up with
// a leader on every broker's Metadata, and a record produced to each
// partition with acks=all is acknowledged: no half-made topic is left.
func TestCreateTopicsTimeoutAndDeparture(t *testing.T) {
	bs := startReplCluster(t, 3)
	const partitions = 200

	createRequest := func(topic string, timeoutMs int32) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = timeoutMs
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 3
		req.Topics = append(req.Topics, rt)
		return req
	}

	// A 1 ms timeout: the commit alone takes longer.
	cl := directClient(t, bs[1])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, createRequest("create-timeout", 1))
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	cr := resp.(*kmsg.CreateTopicsResponse)
	if len(cr.Topics) != 1 {
		t.Fatalf("CreateTopics answered %d topics", len(cr.Topics))
	}
	if code := cr.Topics[0].ErrorCode; code != kerr.RequestTimedOut.Code {
		t.Fatalf("CreateTopics with a 1 ms timeout: error %d (%s) %q, want REQUEST_TIMED_OUT", code, errName(code), derefStr(cr.Topics[0].ErrorMessage))
	}

	// The request sent, then the connection closed before any answer.
	// The raw connection sends the request at the version it carries,
	// and kmsg's default is v0, which weir refuses (v2-v7) by closing
	// the connection: pin one it serves.
	departed := createRequest("create-departed", 60_000)
	departed.Version = 7
	rc := dialRaw(t, bs[2].KafkaAddr)
	rc.Send(departed)
	rc.Close()

	for _, topic := range []string{"create-timeout", "create-departed"} {
		waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, 2*leaderTimeout, nil)
		produceToEveryPartition(t, bs, topic, partitions)
	}
}

// produceToEveryPartition produces one record to each partition with
// acks=all and fails unless every one is acknowledged.
func produceToEveryPartition(t *testing.T, bs []*Broker, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(append(replClientOpts(bs), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, partitions)
	for p := range partitions {
		recs[p] = &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing to every partition of %s: %v", topic, err)
	}
}
