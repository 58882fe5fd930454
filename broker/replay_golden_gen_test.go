package broker

// The generator of the golden partition logs (-args -write-golden): it
// runs only to write a version that does not exist yet.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/raft"
	"github.com/weir-broker/weir/raft/replaytest"
)

// partGen writes a partition log the way leaders would, applying each
// entry to a replica of its own to check the generator's intent.
type partGen struct {
	t       *testing.T
	entries []replaytest.Entry
	index   uint64
	term    uint64
	p       *Partition
}

func (g *partGen) add(typ uint8, data []byte) applyResult {
	g.index++
	g.entries = append(g.entries, replaytest.Entry{Index: g.index, Term: g.term, Type: typ, Data: data})
	if typ != replaytest.TypeCommand {
		return applyResult{}
	}
	return g.p.Apply(raft.Entry{Index: g.index, Term: g.term, Data: bytes.Clone(data)}).(applyResult)
}

// elect starts a term: the new leader's no-op.
func (g *partGen) elect() {
	g.term++
	g.add(replaytest.TypeNoop, nil)
}

func (g *partGen) ok(data []byte) applyResult {
	g.t.Helper()
	r := g.add(replaytest.TypeCommand, data)
	if r.err != nil {
		g.t.Fatalf("generator: entry %d refused: %v", g.index, r.err)
	}
	return r
}

func (g *partGen) fail(data []byte, code *kerr.Error) {
	g.t.Helper()
	if r := g.add(replaytest.TypeCommand, data); !errors.Is(r.err, code) {
		g.t.Fatalf("generator: entry %d answered %v, want %s", g.index, r.err, code.Message)
	}
}

// genRecord is one record of a generated batch.
type genRecord struct {
	key, value []byte
	tsDelta    int64
	headers    [][2]string
}

// genBatch builds a record batch as a producer sends it, compressed with
// codec.
func genBatch(t *testing.T, codec int8, firstTs int64, pid int64, pepoch int16, seq int32, recs []genRecord) []byte {
	var body []byte
	maxTs := firstTs
	for i, r := range recs {
		maxTs = max(maxTs, firstTs+r.tsDelta)
		rec := []byte{0}
		rec = binary.AppendVarint(rec, r.tsDelta)
		rec = binary.AppendVarint(rec, int64(i))
		if r.key == nil {
			rec = binary.AppendVarint(rec, -1)
		} else {
			rec = binary.AppendVarint(rec, int64(len(r.key)))
			rec = append(rec, r.key...)
		}
		rec = binary.AppendVarint(rec, int64(len(r.value)))
		rec = append(rec, r.value...)
		rec = binary.AppendVarint(rec, int64(len(r.headers)))
		for _, h := range r.headers {
			rec = binary.AppendVarint(rec, int64(len(h[0])))
			rec = append(rec, h[0]...)
			rec = binary.AppendVarint(rec, int64(len(h[1])))
			rec = append(rec, h[1]...)
		}
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	body = genCompress(t, codec, body)
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec), LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: firstTs, MaxTimestamp: maxTs, ProducerID: pid, ProducerEpoch: pepoch, FirstSequence: seq,
		NumRecords: int32(len(recs)), Records: body,
	}
	raw := rb.AppendTo(nil)
	rb.Length = int32(len(raw) - 12)
	raw = rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

func genCompress(t *testing.T, codec int8, body []byte) []byte {
	var buf bytes.Buffer
	switch codec {
	case log.CompressionNone:
		return body
	case log.CompressionGzip:
		w := gzip.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case log.CompressionSnappy: // xerial framing, as the Java client writes it
		buf.Write([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1})
		blk := snappy.Encode(nil, body)
		buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(blk))))
		buf.Write(blk)
	case log.CompressionLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case log.CompressionZstd:
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(body, nil)
	default:
		t.Fatalf("codec %d", codec)
	}
	return buf.Bytes()
}

// genValues makes n records with keys key-<i> and values of the given size.
func genValues(n int, prefix string, size int) []genRecord {
	recs := make([]genRecord, n)
	for i := range recs {
		unit := fmt.Sprintf("%s-%d|", prefix, i)
		v := bytes.Repeat([]byte(unit), size/len(unit)+1)[:size]
		recs[i] = genRecord{key: []byte(fmt.Sprintf("key-%d", i)), value: v, tsDelta: int64(i * 3)}
	}
	return recs
}

// generatePartitionV1 is the log of v1.log: three leaders' terms of
// appends (plain and idempotent, every codec, CreateTime and
// LogAppendTime, retries, refused sequences and epochs), DeleteRecords
// and malformed entries.
func generatePartitionV1(t *testing.T) []replaytest.Entry {
	g := &partGen{t: t, term: 1, p: openReplayPartition(t, t.TempDir())}
	ts := int64(partReplayNowMs - 60_000)
	const none, gz, sn, l4, zs = log.CompressionNone, log.CompressionGzip, log.CompressionSnappy, log.CompressionLZ4, log.CompressionZstd
	batch := func(codec int8, pid int64, pepoch int16, seq int32, recs []genRecord) []byte {
		ts += 250
		return genBatch(t, codec, ts, pid, pepoch, seq, recs)
	}
	const pidA, pidB, pidC = 1000, 2000, 3000

	// The group's first configuration and the first leader's no-op.
	g.add(replaytest.TypeConfiguration, nil) // its data left out: the state machine never sees it
	g.add(replaytest.TypeNoop, nil)

	// Term 1: plain and idempotent appends.
	g.ok(encodeAppend(0, batch(none, -1, -1, -1, genValues(3, "plain", 40))))
	a0 := batch(none, pidA, 0, 0, genValues(5, "a", 30))
	first := g.ok(encodeAppend(0, a0)).append.BaseOffset
	a1 := batch(none, pidA, 0, 5, genValues(3, "a", 30))
	second := g.ok(encodeAppend(0, a1)).append.BaseOffset
	// Retries of both: answered with the original offsets, not appended.
	if r := g.ok(encodeAppend(0, a1)); r.append.BaseOffset != second {
		t.Fatalf("generator: retry at %d, want %d", r.append.BaseOffset, second)
	}
	if r := g.ok(encodeAppend(0, a0)); r.append.BaseOffset != first {
		t.Fatalf("generator: retry at %d, want %d", r.append.BaseOffset, first)
	}
	// A gap in the sequence.
	g.fail(encodeAppend(0, batch(none, pidA, 0, 10, genValues(2, "a", 30))), kerr.OutOfOrderSequenceNumber)
	g.ok(encodeAppend(0, batch(gz, pidA, 0, 8, genValues(4, "a-gzip", 60))))
	// LogAppendTime, chosen by the proposer.
	g.ok(encodeAppend(partReplayNowMs-30_000, batch(none, -1, -1, -1, genValues(2, "lat", 20))))
	// A group coordinator's write (offset commits).
	g.ok(encodeAppend(0, log.BuildBatch(ts, []log.KeyValue{
		{Key: []byte("\x00\x01group\x00orders\x00\x00\x00\x00"), Value: []byte("\x00\x03offset-42")},
		{Key: []byte("\x00\x01group\x00orders\x00\x00\x00\x01"), Value: []byte("\x00\x03offset-17")},
	})))
	// Malformed entries.
	g.fail([]byte{2, 1, 0, 0, 0, 0, 0, 0, 0, 0}, kerr.CorruptMessage) // entry version 2
	g.fail([]byte{1, 1, 0}, kerr.CorruptMessage)                      // shorter than the header
	g.fail([]byte{1, 7, 0, 0, 0, 0, 0, 0, 0, 0}, kerr.CorruptMessage) // unknown kind
	g.fail(encodeAppend(0, nil), kerr.CorruptMessage)                 // no batch
	corrupt := batch(none, -1, -1, -1, genValues(2, "corrupt", 20))
	corrupt[len(corrupt)-1] ^= 0xff
	g.fail(encodeAppend(0, corrupt), kerr.CorruptMessage) // CRC mismatch
	g.fail(encodeAppend(0, append(batch(none, -1, -1, -1, genValues(1, "x", 10)), batch(none, -1, -1, -1, genValues(1, "y", 10))...)),
		kerr.CorruptMessage) // two batches in one entry
	g.fail(encodeAppend(0, batch(none, -1, -1, -1, genValues(2, "cut", 20))[:70]), kerr.CorruptMessage) // cut short

	// Term 2: a new leader; the producer bumps its epoch.
	g.elect()
	g.ok(encodeAppend(0, batch(none, pidA, 1, 0, genValues(2, "a-e1", 30))))
	g.fail(encodeAppend(0, batch(none, pidA, 0, 12, genValues(1, "a-old", 30))), kerr.InvalidProducerEpoch)
	g.fail(encodeAppend(0, batch(none, pidA, 2, 3, genValues(1, "a-e2", 30))), kerr.OutOfOrderSequenceNumber)
	// A producer this partition has not seen starts anywhere.
	g.ok(encodeAppend(0, batch(none, pidB, 0, 42, genValues(3, "b", 25))))
	g.ok(encodeAppend(partReplayNowMs-20_000, batch(zs, -1, -1, -1, genValues(6, "zstd-lat", 50))))
	g.ok(encodeAppend(0, batch(sn, pidB, 0, 45, genValues(4, "b-snappy", 50))))
	g.ok(encodeAppend(0, batch(l4, -1, -1, -1, genValues(5, "lz4", 50))))
	// DeleteRecords inside a batch, below the start, past the end.
	g.ok(encodeDeleteRecords(first + 2))
	g.ok(encodeDeleteRecords(first))
	g.fail(encodeDeleteRecords(1_000_000), kerr.OffsetOutOfRange)
	g.fail(encodeDeleteRecords(-5), kerr.OffsetOutOfRange)
	// A delete-records entry with bytes after its offset: read as it is.
	g.ok(append(encodeDeleteRecords(second), 0xde, 0xad))

	// Term 3: sequences wrap, the window of five batches moves on.
	g.elect()
	g.ok(encodeAppend(0, batch(none, pidA, 1, 2, genValues(1, "a-e1", 30))))
	g.ok(encodeAppend(0, batch(none, pidC, 0, 2147483646, genValues(3, "c-wrap", 20)))) // sequences 2147483646, 2147483647, 0
	g.ok(encodeAppend(0, batch(gz, pidC, 0, 1, genValues(2, "c", 20))))
	var window [][]byte
	for i := int32(0); i < 6; i++ {
		window = append(window, batch(none, pidB, 0, 49+i, genValues(1, "b-window", 20)))
		g.ok(encodeAppend(0, window[i]))
	}
	// Its first batch left the window: a retry of it is out of order.
	g.fail(encodeAppend(0, window[0]), kerr.OutOfOrderSequenceNumber)
	// A retry of one still in the window.
	g.ok(encodeAppend(0, window[1]))
	// Everything deleted; appends go on at the same offsets.
	g.ok(encodeDeleteRecords(-1))
	g.ok(encodeAppend(partReplayNowMs-10_000, batch(gz, pidA, 1, 3, genValues(3, "a-after", 40))))
	g.fail(encodeAppend(0, batch(none, pidA, 1, 3, genValues(3, "a-after", 40))[:61]), kerr.CorruptMessage)
	g.ok(encodeAppend(0, batch(none, pidC, 0, 3, genValues(2, "c-after", 40))))
	return g.entries
}
