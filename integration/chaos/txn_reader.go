package chaos

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reading a partition as a read_committed consumer does: Fetch with
// isolation level 1 up to the last stable offset the broker answers, and
// the records of the aborted transactions the response lists dropped on
// the client side, as Kafka's consumers (and kgo) do.

// txnBatch is one decoded record batch with what transactions need.
type txnBatch struct {
	FirstOffset, LastOffset int64
	ProducerID              int64
	Transactional, Control  bool
	Abort                   bool // a control batch's marker is ABORT
	Records                 []logRecord
}

// decodeTxnBatches decodes the complete batches in data (CRC checked,
// uncompressed only), skipping those that end before from, and returns
// them with the offset after the last.
func decodeTxnBatches(data []byte, from int64) ([]txnBatch, int64, error) {
	var out []txnBatch
	next := from
	for pos := 0; len(data)-pos >= 12; {
		size := 12 + int(int32(binary.BigEndian.Uint32(data[pos+8:])))
		if size < 61 {
			return nil, 0, fmt.Errorf("batch at byte %d claims %d bytes", pos, size)
		}
		if pos+size > len(data) {
			break
		}
		raw := data[pos : pos+size]
		pos += size
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(raw); err != nil {
			return nil, 0, fmt.Errorf("batch at byte %d: %w", pos-size, err)
		}
		if crc := crc32.Checksum(raw[21:], castagnoli); int32(crc) != batch.CRC {
			return nil, 0, fmt.Errorf("batch at offset %d: CRC %08x, computed %08x", batch.FirstOffset, uint32(batch.CRC), crc)
		}
		b := txnBatch{
			FirstOffset:   batch.FirstOffset,
			LastOffset:    batch.FirstOffset + int64(batch.LastOffsetDelta),
			ProducerID:    batch.ProducerID,
			Transactional: batch.Attributes&0x10 != 0,
			Control:       batch.Attributes&0x20 != 0,
		}
		if b.LastOffset < from {
			continue
		}
		next = max(next, b.LastOffset+1)
		if codec := batch.Attributes & 0x07; codec != 0 {
			return nil, 0, fmt.Errorf("batch at offset %d is compressed (codec %d); the workload produces uncompressed", batch.FirstOffset, codec)
		}
		recs := batch.Records
		for i := range batch.NumRecords {
			l, n := binary.Varint(recs)
			if n <= 0 || l < 0 || n+int(l) > len(recs) {
				return nil, 0, fmt.Errorf("batch at offset %d: record %d does not fit", batch.FirstOffset, i)
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
				return nil, 0, fmt.Errorf("batch at offset %d: record %d: %w", batch.FirstOffset, i, err)
			}
			recs = recs[n+int(l):]
			if b.Control {
				// A marker's key: version int16, type int16 (0 ABORT, 1 COMMIT).
				if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:]) == 0 {
					b.Abort = true
				}
				continue
			}
			if off := batch.FirstOffset + int64(r.OffsetDelta); off >= from {
				b.Records = append(b.Records, logRecord{Offset: off, Value: string(r.Value)})
			}
		}
		out = append(out, b)
	}
	return out, next, nil
}

// fetchCommitted sends one read_committed fetch of partition p at offset
// to node id.
func (c *Cluster) fetchCommitted(ctx context.Context, id int, topic string, topicID [16]byte, p int32, offset int64, maxBytes int32) (kmsg.FetchResponseTopicPartition, error) {
	req := fetchRequest(topic, topicID, p, offset, maxBytes)
	req.IsolationLevel = 1
	resp, err := c.Ask(ctx, id, req)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("node %d: fetch: %w", id, kerr.ErrorForCode(fr.ErrorCode))
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("node %d: fetch of %s/%d answered %d topics", id, topic, p, len(fr.Topics))
	}
	rp := fr.Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		return rp, fmt.Errorf("node %d: read_committed fetch %s/%d at %d: %w", id, topic, p, offset, kerr.ErrorForCode(rp.ErrorCode))
	}
	return rp, nil
}

// committedView is what a read_committed consumer reads of one partition
// from one broker, and the fetches that read it.
type committedView struct {
	Records []logRecord
	// LastStable and HighWatermark are the last fetch's answer.
	LastStable, HighWatermark int64
	Probes                    []lsoProbe
}

// aborter drops the records of aborted transactions as a consumer does:
// a transactional batch of a producer is aborted from the first offset
// the response lists for it until that producer's ABORT marker.
type aborter map[int64][]int64 // producer id -> first offsets, ascending

func newAborter(list []kmsg.FetchResponseTopicPartitionAbortedTransaction) aborter {
	a := aborter{}
	for _, t := range list {
		a[t.ProducerID] = append(a[t.ProducerID], t.FirstOffset)
	}
	for _, offs := range a {
		slices.Sort(offs)
	}
	return a
}

// keep reports whether b's data records are delivered, and consumes the
// producer's entry at its ABORT marker.
func (a aborter) keep(b txnBatch) bool {
	offs := a[b.ProducerID]
	if b.Control {
		if b.Abort && len(offs) > 0 && b.FirstOffset >= offs[0] {
			if len(offs) == 1 {
				delete(a, b.ProducerID)
			} else {
				a[b.ProducerID] = offs[1:]
			}
		}
		return false
	}
	return !b.Transactional || len(offs) == 0 || b.FirstOffset < offs[0]
}

// maxViewRounds bounds the fetches reading one partition's committed view.
const maxViewRounds = 10_000

// ReadCommittedView reads node id's read_committed view of partition p
// from its start up to the last stable offset it answers.
func (c *Cluster) ReadCommittedView(ctx context.Context, id int, topic string, topicID [16]byte, p int32) (committedView, error) {
	var v committedView
	offset := int64(0)
	for round := 0; ; round++ {
		if round == maxViewRounds {
			return v, fmt.Errorf("node %d: %s/%d: still at offset %d after %d fetches", id, topic, p, offset, round)
		}
		rp, err := c.fetchCommitted(ctx, id, topic, topicID, p, offset, 4<<20)
		if errors.Is(err, kerr.OffsetOutOfRange) && offset == 0 && rp.LogStartOffset > 0 {
			offset = rp.LogStartOffset
			continue
		}
		if err != nil {
			return v, err
		}
		v.LastStable, v.HighWatermark = rp.LastStableOffset, rp.HighWatermark
		batches, next, err := decodeTxnBatches(rp.RecordBatches, offset)
		if err != nil {
			return v, fmt.Errorf("node %d: %s/%d at offset %d: %w", id, topic, p, offset, err)
		}
		probe := lsoProbe{Node: id, Partition: p, FetchOffset: offset, LastStable: rp.LastStableOffset, HighWatermark: rp.HighWatermark, LastDataOffset: -1}
		ab := newAborter(rp.AbortedTransactions)
		for _, b := range batches {
			if !b.Control && len(b.Records) > 0 {
				probe.LastDataOffset = max(probe.LastDataOffset, b.Records[len(b.Records)-1].Offset)
			}
			if ab.keep(b) {
				v.Records = append(v.Records, b.Records...)
			}
		}
		v.Probes = append(v.Probes, probe)
		if next <= offset {
			if offset >= rp.LastStableOffset {
				return v, nil
			}
			return v, fmt.Errorf("node %d: %s/%d: no records at offset %d below its last stable offset %d", id, topic, p, offset, rp.LastStableOffset)
		}
		offset = next
	}
}

// ReadReplicaBatches reads node id's copy of partition p from its start up
// to end as batches, markers included.
func (c *Cluster) ReadReplicaBatches(ctx context.Context, id int, topic string, topicID [16]byte, p int32, end int64) ([]txnBatch, error) {
	return readReplica(ctx, c, id, topic, topicID, p, end, decodeTxnBatches, func(b txnBatch) int64 { return b.FirstOffset })
}

// markerView is what read_committed should return of a partition whose
// batches are these, by the markers alone: plain records, and the records
// of each producer's transaction once its COMMIT marker follows; those
// an ABORT marker ends, or none, are left out.
func markerView(batches []txnBatch) []logRecord {
	var out []logRecord
	pending := map[int64][]logRecord{}
	for _, b := range batches {
		switch {
		case b.Control:
			if !b.Abort {
				out = append(out, pending[b.ProducerID]...)
			}
			delete(pending, b.ProducerID)
		case b.Transactional:
			pending[b.ProducerID] = append(pending[b.ProducerID], b.Records...)
		default:
			out = append(out, b.Records...)
		}
	}
	slices.SortFunc(out, func(a, b logRecord) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}
