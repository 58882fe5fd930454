package kafka

import (
	"bufio"
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log/logtest"
)

// testBuffers counts the buffers a split frame takes and gives back.
type testBuffers struct{ out, back int }

func (b *testBuffers) ProduceBuffer(n int) []byte {
	b.out++
	return make([]byte, broker.EntryHeadroom+n)
}

func (b *testBuffers) ReleaseProduceBuffer([]byte) { b.back++ }

// encodeFrame is a produce request as a client sends it, without the size
// prefix: the request header (v1, or v2 with empty tags for flexible
// versions), then the body.
func encodeFrame(req *kmsg.ProduceRequest, clientID string) []byte {
	b := []byte{0, 0, byte(req.Version >> 8), byte(req.Version), 0, 0, 0, 7}
	b = append(b, byte(len(clientID)>>8), byte(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// randomProduce is a produce request of version v with record sets of
// every kind: absent, empty, small and large.
func randomProduce(rng *rand.Rand, v int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = v, -1, 5000
	if rng.IntN(2) == 0 {
		req.TransactionID = kmsg.StringPtr("txn")
	}
	for t := range 1 + rng.IntN(3) {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = string(rune('a' + t))
		rt.TopicID[0] = byte(t + 1)
		for p := range 1 + rng.IntN(4) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(p)
			switch rng.IntN(4) {
			case 0:
				rp.Records = nil
			case 1:
				rp.Records = make([]byte, rng.IntN(splitRecordsMin))
			default:
				rp.Records = make([]byte, splitRecordsMin+rng.IntN(3*splitRecordsMin))
			}
			for i := range rp.Records {
				rp.Records[i] = byte(rng.Uint32())
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// decodeSplit reads frame as the connection's reader does and decodes it
// as the handler does.
func decodeSplit(t *testing.T, frame []byte, bufs *testBuffers) (*kmsg.ProduceRequest, [][]byte, error) {
	t.Helper()
	out, split, err := readProduceFrame(bufio.NewReader(bytes.NewReader(frame)), len(frame), make([]byte, len(frame)), broker.EntryHeadroom, bufs.ProduceBuffer, bufs.ReleaseProduceBuffer)
	if err != nil {
		return nil, nil, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = int16(out[2])<<8 | int16(out[3])
	body := out[10+int(out[9]):] // fixed header and a client id under 256 bytes
	if req.IsFlexible() {
		body = body[1:]
	}
	if err := req.ReadFrom(body); err != nil {
		t.Fatalf("v%d: the frame left after splitting does not decode: %v", req.Version, err)
	}
	entries, err := split.restore(req)
	return req, entries, err
}

// A frame read as it is parsed decodes, once its record sets are put back,
// to the request that was sent, for every version read this way; exactly
// the large record sets were read outside the frame.
func TestReadProduceFrameMatchesDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for v := int16(3); v <= 13; v++ {
		for range 30 {
			sent := randomProduce(rng, v)
			bufs := &testBuffers{}
			got, entries, err := decodeSplit(t, encodeFrame(sent, "client-1"), bufs)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			want := kmsg.NewPtrProduceRequest()
			want.Version = v
			if err := want.ReadFrom(sent.AppendTo(nil)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("v%d: split and decoded %+v, want %+v", v, got, want)
			}
			k, large := 0, 0
			for _, rt := range sent.Topics {
				for _, rp := range rt.Partitions {
					if split := entries[k] != nil; split != (len(rp.Records) >= splitRecordsMin) {
						t.Fatalf("v%d: partition %d of %d bytes read outside the frame: %v", v, k, len(rp.Records), split)
					}
					if entries[k] != nil {
						large++
					}
					k++
				}
			}
			if bufs.out != large || bufs.back != 0 {
				t.Fatalf("v%d: %d buffers taken, %d given back; want %d, 0", v, bufs.out, bufs.back, large)
			}
		}
	}
}

// A frame cut short, or with bytes after the request, or counts that do
// not fit it, is refused, and every buffer it took is given back.
func TestReadProduceFrameRefusesMalformed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for v := int16(3); v <= 13; v++ {
		sent := randomProduce(rng, v)
		sent.Topics[0].Partitions[0].Records = make([]byte, 2*splitRecordsMin)
		frame := encodeFrame(sent, "c")
		for _, bad := range [][]byte{
			frame[:len(frame)-1],
			frame[:len(frame)/2],
			append(append([]byte(nil), frame...), 0),
		} {
			bufs := &testBuffers{}
			_, _, err := readProduceFrame(bufio.NewReader(bytes.NewReader(bad)), len(bad), make([]byte, len(bad)), broker.EntryHeadroom, bufs.ProduceBuffer, bufs.ReleaseProduceBuffer)
			if err == nil {
				t.Fatalf("v%d: a malformed frame of %d bytes (sent %d) was accepted", v, len(bad), len(frame))
			}
			if bufs.out != bufs.back {
				t.Fatalf("v%d: %d buffers taken, %d given back", v, bufs.out, bufs.back)
			}
		}
		// A topic count far beyond what the frame holds.
		huge := append([]byte(nil), frame[:10+1]...) // header, one-byte client id
		if sent.IsFlexible() {
			huge = append(huge, 0, 0)                   // header tags, null transactional id
			huge = append(huge, 0xff, 0xff, 0, 0, 0, 1) // acks, timeout
			huge = append(huge, 0xff, 0xff, 0xff, 0x7f) // compact topic count
		} else {
			huge = append(huge, 0xff, 0xff)             // null transactional id
			huge = append(huge, 0xff, 0xff, 0, 0, 0, 1) // acks, timeout
			huge = append(huge, 0x7f, 0xff, 0xff, 0xff) // topic count
		}
		huge = append(huge, make([]byte, 64)...)
		_, _, err := readProduceFrame(bufio.NewReader(bytes.NewReader(huge)), len(huge), make([]byte, len(huge)), broker.EntryHeadroom, (&testBuffers{}).ProduceBuffer, (&testBuffers{}).ReleaseProduceBuffer)
		if !errors.Is(err, errMalformedProduce) {
			t.Fatalf("v%d: a topic count past the frame: %v, want a malformed request", v, err)
		}
	}
}

// Whatever the bytes, reading them as a produce frame never panics and
// never keeps a buffer it took; what it accepts, kmsg decodes alike.
func FuzzReadProduceFrame(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, v := range []int16{3, 8, 9, 12, 13} {
		f.Add(encodeFrame(randomProduce(rng, v), "fuzz"))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		bufs := &testBuffers{}
		out, split, err := readProduceFrame(bufio.NewReader(bytes.NewReader(frame)), len(frame), make([]byte, len(frame)), broker.EntryHeadroom, bufs.ProduceBuffer, bufs.ReleaseProduceBuffer)
		if err != nil {
			if bufs.out != bufs.back {
				t.Fatalf("refused, yet %d buffers taken and %d given back", bufs.out, bufs.back)
			}
			return
		}
		if len(out) > len(frame) {
			t.Fatalf("the frame grew from %d to %d bytes", len(frame), len(out))
		}
		split.release(bufs)
		if bufs.out != bufs.back {
			t.Fatalf("%d buffers taken, %d given back after release", bufs.out, bufs.back)
		}
	})
}

// Produce requests large enough to be read as they are parsed, at a
// classic, a flexible and a topic-id version, with large and small
// record sets side by side and acks=1 and -1: every batch is answered at
// the next offsets and fetched back with the records it was sent with.
func TestProduceRecordsReadIntoEntries(t *testing.T) {
	_, b, addr := startServer(t)
	names := []string{"split-a", "split-b", "split-c"}
	ids := map[string][16]byte{}
	for _, name := range names {
		tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: name, Partitions: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = tp.ID()
		waitLeader(t, b, name)
	}
	c := dial(t, addr)
	sent := map[string][][]byte{}
	for _, v := range []int16{8, 9, 13} {
		for _, acks := range []int16{-1, 1} {
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(v)
			req.Acks, req.TimeoutMillis = acks, 5000
			for i, name := range names {
				// b gets a small batch, which stays in the frame.
				batch := logtest.Batch{Records: 8, ValueSize: 1500 + int(v)*10 + int(acks)}.Encode()
				if i == 1 {
					batch = logtest.Batch{Records: 2, ValueSize: 30}.Encode()
				}
				sent[name] = append(sent[name], batch)
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic, rt.TopicID = name, ids[name]
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = batch
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
			}
			if size := len(req.AppendTo(nil)); size < splitFrameMin {
				t.Fatalf("a request of %d bytes is not read as it is parsed (under %d)", size, splitFrameMin)
			}
			resp := c.roundTrip(req).(*kmsg.ProduceResponse)
			for i, rt := range resp.Topics {
				name := names[i]
				sp := rt.Partitions[0]
				records := map[bool]int64{true: 2, false: 8}[i == 1]
				want := int64(len(sent[name])-1) * records
				if sp.ErrorCode != 0 || sp.BaseOffset != want {
					t.Fatalf("produce v%d acks=%d to %s: error %d base offset %d, want 0 and %d", v, acks, name, sp.ErrorCode, sp.BaseOffset, want)
				}
			}
		}
	}
	for _, name := range names {
		resp := c.roundTrip(fetchRequest(13, name, ids[name], 0, 1<<20)).(*kmsg.FetchResponse)
		sp := resp.Topics[0].Partitions[0]
		got := sp.RecordBatches
		for i, batch := range sent[name] {
			var rb, want kmsg.RecordBatch
			if err := rb.ReadFrom(got); err != nil {
				t.Fatalf("%s: batch %d of what was fetched: %v", name, i, err)
			}
			if err := want.ReadFrom(batch); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rb.Records, want.Records) || rb.NumRecords != want.NumRecords {
				t.Fatalf("%s: batch %d fetched with other records than it was sent with", name, i)
			}
			got = got[12+int(rb.Length):]
		}
		if len(got) != 0 {
			t.Fatalf("%s: %d bytes fetched after the batches sent", name, len(got))
		}
	}
}
