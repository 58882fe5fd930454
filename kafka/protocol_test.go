package kafka

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log/logtest"
)

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func TestApiVersionsEveryVersion(t *testing.T) {
	_, _, addr := startServer(t)
	c := dial(t, addr)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "weir-test", "1.0"
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		got := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = k
		}
		if p := got[0]; p.MinVersion != 0 || p.MaxVersion != 13 {
			t.Errorf("v%d: produce advertised %d-%d, want 0-13", v, p.MinVersion, p.MaxVersion)
		}
		if f := got[1]; f.MinVersion != 4 || f.MaxVersion != 18 {
			t.Errorf("v%d: fetch advertised %d-%d, want 4-18", v, f.MinVersion, f.MaxVersion)
		}
	}
}

// TestApiVersionsUnsupported: KIP-511, a v0 body with the full list.
func TestApiVersionsUnsupported(t *testing.T) {
	_, _, addr := startServer(t)
	c := dial(t, addr)
	frame := []byte{0, 0, 0, 0, 0, apiVersionsKey, 0, 127, 0, 0, 0, 9, 0xff, 0xff, 0}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	c.writeRaw(frame)
	corr, body, err := c.readFrame()
	if err != nil || corr != 9 {
		t.Fatalf("corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) < 10 {
		t.Fatalf("error %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	// The connection stays usable at a supported version.
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	if r := c.roundTrip(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("retry at v3: error %d", r.ErrorCode)
	}
}

func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	_, _, addr := startServer(t)
	healthy := dial(t, addr)
	cases := map[string][]byte{
		"tls client hello":   {0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00},
		"http request":       []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"size below header":  {0, 0, 0, 3, 1, 2, 3},
		"negative size":      {0xff, 0xff, 0xff, 0xfe},
		"unknown api key":    {0, 0, 0, 10, 0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff},
		"unsupported fetch":  {0, 0, 0, 10, 0, 1, 0, 2, 0, 0, 0, 1, 0xff, 0xff},
		"truncated metadata": {0, 0, 0, 13, 0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0},
		"garbage produce":    {0, 0, 0, 16, 0, 0, 0, 7, 0, 0, 0, 1, 0xff, 0xff, 0xde, 0xad, 0xbe, 0xef, 0x12, 0x34},
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			c.writeRaw(frame)
			c.expectClosed()
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(12)
			if resp := healthy.roundTrip(req).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
				t.Fatalf("healthy connection: %d brokers", len(resp.Brokers))
			}
		})
	}
}

// TestPipelinedRequestsAnsweredInOrder, with an acks=0 produce in the
// middle that gets no response at all.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	_, b, addr := startServer(t)
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "pipe", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	produce := produceRequest(7, 0, "pipe", logtest.Batch{Records: 3}.Encode())
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	c1 := c.send(meta)
	c.send(produce)
	c3 := c.send(api)
	c.read(meta, c1)
	c.read(api, c3)
	if hwm := b.Topic("pipe").Partition(0).HighWatermark(); hwm != 3 {
		t.Fatalf("acks=0 produce not applied: hwm %d", hwm)
	}
}

func produceRequest(version int16, acks int16, topic string, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchRequest(version int16, topic string, id [16]byte, offset int64, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = maxBytes, 0, 0
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestProduceFetchEveryVersion round-trips records through every Produce
// and Fetch version served, names before v13 and topic IDs after.
func TestProduceFetchEveryVersion(t *testing.T) {
	_, b, addr := startServer(t)
	tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: "rt", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	var offset int64
	for v := int16(3); v <= 13; v++ {
		req := produceRequest(v, -1, "rt", logtest.Batch{Records: 2, ValueSize: 10}.Encode())
		req.Topics[0].TopicID = tp.ID()
		resp := c.roundTrip(req).(*kmsg.ProduceResponse)
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 || sp.BaseOffset != offset {
			t.Fatalf("produce v%d: error %d base offset %d, want %d", v, sp.ErrorCode, sp.BaseOffset, offset)
		}
		offset += 2
	}
	for v := int16(4); v <= 18; v++ {
		resp := c.roundTrip(fetchRequest(v, "rt", tp.ID(), 0, 1<<20)).(*kmsg.FetchResponse)
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 || sp.HighWatermark != offset {
			t.Fatalf("fetch v%d: error %d hwm %d", v, sp.ErrorCode, sp.HighWatermark)
		}
		if n := countRecords(t, sp.RecordBatches); n != int(offset) {
			t.Fatalf("fetch v%d: %d records, want %d", v, n, offset)
		}
		if v >= 13 && resp.Topics[0].TopicID != tp.ID() {
			t.Fatalf("fetch v%d: topic id not echoed", v)
		}
	}
}

func countRecords(t testing.TB, raw []byte) int {
	t.Helper()
	n := 0
	for len(raw) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		n += int(rb.NumRecords)
		raw = raw[12+rb.Length:]
	}
	return n
}

func TestProduceOldVersionsRefused(t *testing.T) {
	_, b, addr := startServer(t)
	b.CreateTopic(broker.CreateTopicRequest{Name: "old", Partitions: 1})
	c := dial(t, addr)
	for v := int16(0); v < 3; v++ {
		resp := c.roundTrip(produceRequest(v, 1, "old", logtest.Batch{}.Encode())).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnsupportedVersion.Code {
			t.Fatalf("produce v%d: error %d, want UNSUPPORTED_VERSION", v, code)
		}
	}
	resp := c.roundTrip(produceRequest(9, 2, "old", logtest.Batch{}.Encode())).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: error %d", code)
	}
}

// TestEmptyFetchIsNotNull: librdkafka rejects a null record set.
func TestEmptyFetchIsNotNull(t *testing.T) {
	_, b, addr := startServer(t)
	b.CreateTopic(broker.CreateTopicRequest{Name: "empty", Partitions: 1})
	c := dial(t, addr)
	req := fetchRequest(11, "empty", [16]byte{}, 0, 1<<20)
	corr := c.send(req)
	_, body, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	_ = corr
	// v11 body ends with the partition's records: int32 length 0, then
	// no tagged fields (non-flexible). A null would be 0xffffffff.
	if tail := binary.BigEndian.Uint32(body[len(body)-4:]); tail != 0 {
		t.Fatalf("records length %#x, want 0", tail)
	}
}

func TestFetchUnknownTopicID(t *testing.T) {
	_, _, addr := startServer(t)
	c := dial(t, addr)
	resp := c.roundTrip(fetchRequest(13, "", [16]byte{1, 2, 3}, 0, 1000)).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicID.Code {
		t.Fatalf("error %d, want UNKNOWN_TOPIC_ID", code)
	}
	resp = c.roundTrip(fetchRequest(12, "nope", [16]byte{}, 0, 1000)).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("error %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
	}
}

// TestMetadataByTopicID: the ID wins over the (empty) name the Java
// AdminClient sends with it.
func TestMetadataByTopicID(t *testing.T) {
	_, b, addr := startServer(t)
	tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: "byid", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	empty := ""
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(13)
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: tp.ID(), Topic: &empty}, {TopicID: [16]byte{9}, Topic: &empty}}
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if got := resp.Topics[0]; got.ErrorCode != 0 || got.Topic == nil || *got.Topic != "byid" || len(got.Partitions) != 2 {
		t.Fatalf("known id: error %d name %v partitions %d", got.ErrorCode, got.Topic, len(got.Partitions))
	}
	if got := resp.Topics[1]; got.ErrorCode != kerr.UnknownTopicID.Code || got.Topic != nil {
		t.Fatalf("unknown id: error %d name %v", got.ErrorCode, got.Topic)
	}
}
