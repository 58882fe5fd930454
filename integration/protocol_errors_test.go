package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkAlive asserts the broker process runs and a new client can produce
// and consume a record.
func checkAlive(t *testing.T, b *Broker, topic string) {
	t.Helper()
	if !b.Running() {
		t.Fatalf("weir is no longer running")
	}
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	val := fmt.Appendf(nil, "alive-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r := &kgo.Record{Topic: topic, Partition: 0, Value: val}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("liveness produce: %v", err)
	}
	cons := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(r.Offset)}}))
	fs := cons.PollRecords(ctx, 1)
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatalf("liveness consume: %v", errs[0].Err)
	}
	recs := fs.Records()
	if len(recs) == 0 || !bytes.Equal(recs[0].Value, val) {
		t.Fatalf("liveness consume returned %d records, want value %q", len(recs), val)
	}
	cons.Close()
}

func frame(body []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(out, body...)
}

// TestProtocolGarbage sends broken frames on fresh connections; each is
// closed (or answered) and the broker keeps serving.
func TestProtocolGarbage(t *testing.T) {
	b := StartBroker(t)
	const topic = "garbage-alive"
	CreateTopic(t, b, topic, 1, nil)

	tlsHello := []byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03}
	tlsHello = append(tlsHello, bytes.Repeat([]byte{0x42}, 160)...)
	metadataGarbage := []byte{0, 3, 0, 12, 0, 0, 0, 9, 0, 1, 'x', 0} // Metadata v12 header
	metadataGarbage = append(metadataGarbage, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x80, 0x80)
	unknownKey := []byte{0x27, 0x0f, 0, 0, 0, 0, 0, 7, 0, 1, 'x'} // api key 9999 v0, corr 7

	cases := []struct {
		name       string
		data       []byte
		mustClose  bool // answering is not acceptable
		answerCorr int32
	}{
		{name: "garbage body", data: frame(bytes.Repeat([]byte{0xff}, 24))},
		{name: "metadata with garbage body", data: frame(metadataGarbage)},
		{name: "truncated header", data: frame([]byte{0, 18})},
		{name: "TLS client hello", data: tlsHello, mustClose: true},
		{name: "HTTP request", data: []byte("GET /v1/status/ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), mustClose: true},
		{name: "negative size", data: []byte{0xff, 0xff, 0xff, 0xf0, 1, 2, 3, 4}, mustClose: true},
		{name: "unknown api key 9999", data: frame(unknownKey), answerCorr: 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := dialRaw(t, b.KafkaAddr)
			if err := rc.Write(c.data); err != nil {
				t.Logf("write: %v (connection already closed)", err)
			}
			if c.mustClose {
				if err := rc.expectClosed(5 * time.Second); err != nil {
					t.Errorf("%s: %v; want the connection closed", c.name, err)
				}
			} else {
				fr, err := rc.ReadFrame(5 * time.Second)
				var ne net.Error
				switch {
				case err == nil:
					if len(fr) < 4 {
						t.Errorf("%s: answered with a %d-byte frame", c.name, len(fr))
					} else if c.answerCorr != 0 {
						if got := int32(binary.BigEndian.Uint32(fr)); got != c.answerCorr {
							t.Errorf("%s: answered with correlation id %d, want %d", c.name, got, c.answerCorr)
						}
					}
					t.Logf("%s: answered (%d bytes)", c.name, len(fr))
				case errors.As(err, &ne) && ne.Timeout():
					t.Errorf("%s: neither answered nor closed within 5s", c.name)
				default:
					t.Logf("%s: connection closed (%v)", c.name, err)
				}
			}
			checkAlive(t, b, topic)
		})
	}
}

// TestMaxRequestBytes: a size prefix above max_request_bytes closes the
// connection at once, before the body is sent; a request under it works.
func TestMaxRequestBytes(t *testing.T) {
	b := StartBroker(t, WithSet("max_request_bytes", "1048576"))
	const topic = "maxreq"
	CreateTopic(t, b, topic, 1, nil)

	rc := dialRaw(t, b.KafkaAddr)
	if err := rc.Write([]byte{0x00, 0x10, 0x00, 0x01}); err != nil { // 1048577
		t.Fatalf("write: %v", err)
	}
	if err := rc.expectClosed(5 * time.Second); err != nil {
		t.Errorf("size prefix 1048577 with max_request_bytes=1048576 and no body sent: %v; want the connection closed without waiting for the body", err)
	}

	// 900 KB produce fits.
	vers := apiVersions(t, b.KafkaAddr)
	rc2 := dialRaw(t, b.KafkaAddr)
	batch := buildBatch(batchOpts{}, []rec{{Value: bytes.Repeat([]byte("a"), 900<<10)}})
	r := produceRaw(t, rc2, produceVersion(t, vers), -1, topic, 0, batch)
	if r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Errorf("900 KiB produce under max_request_bytes: error %d offset %d, want 0 and 0", r.ErrorCode, r.BaseOffset)
	}
	checkAlive(t, b, topic)
}

// TestApiVersionsUnsupported: ApiVersions v127 gets a v0-encoded
// UNSUPPORTED_VERSION response listing the supported ranges, and the
// connection stays usable for the retry at v0.
func TestApiVersionsUnsupported(t *testing.T) {
	b := StartBroker(t)
	rc := dialRaw(t, b.KafkaAddr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 127
	req.ClientSoftwareName = "weir-integration"
	req.ClientSoftwareVersion = "1.0.0"
	corr := rc.Send(req)
	resp := rc.Recv(req, corr, 0, 10*time.Second).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != errUnsupportedVersion {
		t.Errorf("ApiVersions v127: error %d, want %d (UNSUPPORTED_VERSION)", resp.ErrorCode, errUnsupportedVersion)
	}
	keys := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range resp.ApiKeys {
		keys[k.ApiKey] = k
	}
	for _, want := range []struct{ key, minMax int16 }{{18, 3}, {0, 9}, {1, 11}, {3, 12}} {
		k, ok := keys[want.key]
		if !ok {
			t.Errorf("UNSUPPORTED_VERSION response does not list api key %d (got %d keys)", want.key, len(resp.ApiKeys))
			continue
		}
		if k.MinVersion > k.MaxVersion || k.MaxVersion < want.minMax {
			t.Errorf("api key %d: versions %d..%d, want max >= %d", want.key, k.MinVersion, k.MaxVersion, want.minMax)
		}
	}
	// Retry at v0 on the same connection.
	req0 := kmsg.NewPtrApiVersionsRequest()
	req0.Version = 0
	resp0 := rc.Do(req0).(*kmsg.ApiVersionsResponse)
	if resp0.ErrorCode != 0 || len(resp0.ApiKeys) == 0 {
		t.Errorf("ApiVersions v0 after the v127 attempt: error %d, %d keys", resp0.ErrorCode, len(resp0.ApiKeys))
	}
}

// TestProduceErrors: CRC mismatch, oversized batch, unknown topic and
// partition are rejected with their error codes, nothing is appended, and
// the same connection then produces fine.
func TestProduceErrors(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	pv := produceVersion(t, vers)
	const topic = "produce-errors"
	CreateTopic(t, b, topic, 2, nil)
	rc := dialRaw(t, b.KafkaAddr)

	corrupt := buildBatch(batchOpts{}, []rec{{Key: []byte("k"), Value: []byte("value-to-corrupt")}})
	corrupt[len(corrupt)-3] ^= 0x55 // inside the value, covered by the CRC
	if r := produceRaw(t, rc, pv, -1, topic, 0, corrupt); r.ErrorCode != errCorruptMessage {
		t.Errorf("produce with a CRC mismatch: error %d offset %d, want %d (CORRUPT_MESSAGE)", r.ErrorCode, r.BaseOffset, errCorruptMessage)
	}

	badCRCField := buildBatch(batchOpts{}, []rec{{Value: []byte("v")}})
	badCRCField[17] ^= 0x01 // the CRC field itself
	if r := produceRaw(t, rc, pv, -1, topic, 0, badCRCField); r.ErrorCode != errCorruptMessage {
		t.Errorf("produce with a wrong CRC field: error %d, want %d (CORRUPT_MESSAGE)", r.ErrorCode, errCorruptMessage)
	}

	big := buildBatch(batchOpts{}, []rec{{Value: bytes.Repeat([]byte("z"), 1100<<10)}})
	if r := produceRaw(t, rc, pv, -1, topic, 0, big); r.ErrorCode != errMessageTooLarge {
		t.Errorf("produce of a %d-byte batch (kafka_batch_max_bytes 1048576): error %d, want %d (MESSAGE_TOO_LARGE)", len(big), r.ErrorCode, errMessageTooLarge)
	}

	ok := buildBatch(batchOpts{}, []rec{{Value: []byte("fine")}})
	if r := produceRaw(t, rc, pv, -1, "no-such-topic", 0, ok); r.ErrorCode != errUnknownTopicOrPartition {
		t.Errorf("produce to an unknown topic: error %d, want %d (UNKNOWN_TOPIC_OR_PARTITION)", r.ErrorCode, errUnknownTopicOrPartition)
	}
	if r := produceRaw(t, rc, pv, -1, topic, 5, ok); r.ErrorCode != errUnknownTopicOrPartition {
		t.Errorf("produce to partition 5 of a 2-partition topic: error %d, want %d (UNKNOWN_TOPIC_OR_PARTITION)", r.ErrorCode, errUnknownTopicOrPartition)
	}

	// Nothing was appended, and the connection still works.
	r := produceRaw(t, rc, pv, -1, topic, 0, ok)
	if r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Errorf("valid produce after the rejected ones: error %d base offset %d, want 0 and 0 (a rejected batch was appended?)", r.ErrorCode, r.BaseOffset)
	}
	// A batch just under the limit is accepted.
	under := buildBatch(batchOpts{}, []rec{{Value: bytes.Repeat([]byte("u"), 1000<<10)}})
	if r := produceRaw(t, rc, pv, -1, topic, 1, under); r.ErrorCode != 0 {
		t.Errorf("produce of a %d-byte batch (under 1048576): error %d, want 0", len(under), r.ErrorCode)
	}
	checkAlive(t, b, topic)
}

// TestProduceBatchMaxBytesSetting: cluster.kafka_batch_max_bytes set on the
// command line is enforced.
func TestProduceBatchMaxBytesSetting(t *testing.T) {
	b := StartBroker(t, WithSet("cluster.kafka_batch_max_bytes", "4096"))
	vers := apiVersions(t, b.KafkaAddr)
	const topic = "small-batches"
	CreateTopic(t, b, topic, 1, nil)
	rc := dialRaw(t, b.KafkaAddr)
	pv := produceVersion(t, vers)
	if r := produceRaw(t, rc, pv, -1, topic, 0, buildBatch(batchOpts{}, []rec{{Value: bytes.Repeat([]byte("x"), 5000)}})); r.ErrorCode != errMessageTooLarge {
		t.Errorf("5000-byte batch with kafka_batch_max_bytes=4096: error %d, want %d", r.ErrorCode, errMessageTooLarge)
	}
	if r := produceRaw(t, rc, pv, -1, topic, 0, buildBatch(batchOpts{}, []rec{{Value: bytes.Repeat([]byte("x"), 3000)}})); r.ErrorCode != 0 {
		t.Errorf("3000-byte batch with kafka_batch_max_bytes=4096: error %d, want 0", r.ErrorCode)
	}
}

func metadataAutoCreate(t *testing.T, b *Broker, topic string) kmsg.MetadataResponseTopic {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := b.RawRequest(t, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || derefStr(resp.Topics[0].Topic) != topic {
		t.Fatalf("metadata for %s: %d topics", topic, len(resp.Topics))
	}
	return resp.Topics[0]
}

// TestAutoCreateTopics: auto-creation is off by default and on with
// --set cluster.auto_create_topics_enabled=true, using
// default_topic_partitions.
func TestAutoCreateTopics(t *testing.T) {
	t.Run("disabled by default", func(t *testing.T) {
		b := StartBroker(t)
		mt := metadataAutoCreate(t, b, "auto-off")
		if mt.ErrorCode != errUnknownTopicOrPartition {
			t.Errorf("metadata allow_auto_topic_creation=true with auto-create disabled: topic error %d, want %d", mt.ErrorCode, errUnknownTopicOrPartition)
		}
		topics, err := b.Admin(t).ListTopics(ctxTimeout(t, requestTimeout))
		if err != nil {
			t.Fatal(err)
		}
		if topics.Has("auto-off") {
			t.Errorf("topic auto-off was created with auto-create disabled")
		}
		// A kgo producer asking for auto-creation fails for that record.
		cl := b.Client(t, kgo.AllowAutoTopicCreation(), kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(5*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "auto-off", Value: []byte("x")}).FirstErr(); err == nil {
			t.Errorf("produce to a missing topic with auto-create disabled succeeded")
		}
	})

	t.Run("enabled", func(t *testing.T) {
		b := StartBroker(t, WithSet("cluster.auto_create_topics_enabled", "true"))
		cl := b.Client(t, kgo.AllowAutoTopicCreation())
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r := &kgo.Record{Topic: "auto-on", Value: []byte("auto")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce with auto-create enabled: %v", err)
		}
		waitTopicReady(t, b, "auto-on", 1)
		got := consumeN(t, b, 1, 20*time.Second, []string{"auto-on"})
		if string(got[0].Value) != "auto" {
			t.Errorf("consumed %q, want %q", got[0].Value, "auto")
		}
		// Metadata alone creates a topic too (Kafka behaviour).
		mt := metadataAutoCreate(t, b, "auto-by-metadata")
		if mt.ErrorCode != 0 && mt.ErrorCode != 5 { // NONE or LEADER_NOT_AVAILABLE while creating
			t.Errorf("metadata auto-create: topic error %d, want 0 or 5", mt.ErrorCode)
		}
		waitTopicReady(t, b, "auto-by-metadata", 1)
	})

	t.Run("default partitions", func(t *testing.T) {
		b := StartBroker(t,
			WithSet("cluster.auto_create_topics_enabled", "true"),
			WithSet("cluster.default_topic_partitions", "3"))
		metadataAutoCreate(t, b, "auto-three")
		waitTopicReady(t, b, "auto-three", 3)
	})
}

// TestProduceBatchValidation: record batches that Kafka rejects are rejected
// and nothing of them is appended.
func TestProduceBatchValidation(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	pv := produceVersion(t, vers)
	const topic = "batch-validation"
	CreateTopic(t, b, topic, 1, nil)
	rc := dialRaw(t, b.KafkaAddr)
	two := func() []byte {
		return buildBatch(batchOpts{}, []rec{{Value: []byte("a")}, {Value: []byte("b")}})
	}
	const errInvalidRecord int16 = 87

	badDelta := two()
	binary.BigEndian.PutUint32(badDelta[23:27], 5) // LastOffsetDelta 5 for 2 records
	resealBatch(badDelta)
	badCount := two()
	binary.BigEndian.PutUint32(badCount[57:61], 3) // NumRecords 3 for 2 records
	resealBatch(badCount)
	magic1 := two()
	magic1[16] = 1
	trailing := append(two(), 1, 2, 3)
	control := buildBatch(batchOpts{Attributes: 0x20}, []rec{{Value: []byte("ctl")}})
	noSeq := buildBatch(batchOpts{ProducerID: 4242, ProducerEpoch: 0, BaseSequence: -1}, []rec{{Value: []byte("pid without sequence")}})

	cases := []struct {
		name string
		data []byte
		want []int16
	}{
		{"two batches in one partition (produce v3+ allows exactly one)", append(two(), two()...), []int16{errInvalidRecord}},
		{"control batch from a client", control, []int16{errInvalidRecord}},
		{"producer id with base sequence -1", noSeq, []int16{errInvalidRecord}},
		{"last offset delta does not match the records", badDelta, []int16{errCorruptMessage, errInvalidRecord}},
		{"record count does not match the records", badCount, []int16{errCorruptMessage, errInvalidRecord}},
		{"magic 1 inside a v2 produce", magic1, []int16{errCorruptMessage, errInvalidRecord}},
		{"trailing bytes after the batch", trailing, []int16{errCorruptMessage, errInvalidRecord}},
		{"empty records", nil, []int16{errCorruptMessage, errInvalidRecord}},
	}
	for _, c := range cases {
		r := produceRaw(t, rc, pv, -1, topic, 0, c.data)
		ok := false
		for _, w := range c.want {
			ok = ok || r.ErrorCode == w
		}
		if !ok {
			t.Errorf("produce v%d, %s: error %d base offset %d, want one of %v", pv, c.name, r.ErrorCode, r.BaseOffset, c.want)
		}
	}
	if off, _, ec := listOffsetRaw(t, b, topic, 0, -1, 0); ec != 0 || off != 0 {
		t.Errorf("HWM after only invalid produces: %d (error %d), want 0: invalid batches were appended", off, ec)
	}
	// zstd needs produce v7+ (Kafka: UNSUPPORTED_COMPRESSION_TYPE).
	if vers[0][0] <= 6 {
		zb := zstdBatch(t, []rec{{Value: []byte("zstd-at-v6")}})
		if r := produceRaw(t, rc, 6, -1, topic, 0, zb); r.ErrorCode != errUnsupportedCompression {
			t.Errorf("produce v6 with a zstd batch: error %d base offset %d, want %d (UNSUPPORTED_COMPRESSION_TYPE)", r.ErrorCode, r.BaseOffset, errUnsupportedCompression)
		}
		if r := produceRaw(t, rc, pv, -1, topic, 0, zb); r.ErrorCode != 0 {
			t.Errorf("produce v%d with a zstd batch: error %d, want 0", pv, r.ErrorCode)
		}
	}
	// acks other than -1, 0, 1 is INVALID_REQUIRED_ACKS.
	if r := produceRaw(t, rc, pv, 2, topic, 0, two()); r.ErrorCode != 21 {
		t.Errorf("produce with acks=2: error %d, want 21 (INVALID_REQUIRED_ACKS)", r.ErrorCode)
	}
}
