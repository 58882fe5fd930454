package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reading one replica's copy of a partition: weir's followers serve
// consumer fetches (Fetch v11+, replica id -1) up to their own log end,
// and a fetch without a rack is served by whichever replica it is sent
// to, so a fetch sent to each broker directly reads that broker's log.

// logRecord is one record of a replica's log.
type logRecord struct {
	Offset int64
	Value  string
}

// maxFetchRounds bounds the fetches that read one replica's log.
const maxFetchRounds = 100_000

func fetchRequest(topic string, id [16]byte, p int32, offset int64, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, maxBytes
	req.SessionEpoch = -1 // sessionless
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, maxBytes
	rp.CurrentLeaderEpoch = -1 // no fencing: read whatever this replica has
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchOnce sends one fetch of partition p at offset to node id.
func (c *Cluster) fetchOnce(ctx context.Context, id int, topic string, topicID [16]byte, p int32, offset int64, maxBytes int32) (kmsg.FetchResponseTopicPartition, error) {
	resp, err := c.Ask(ctx, id, fetchRequest(topic, topicID, p, offset, maxBytes))
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("node %d: fetch: %v", id, kerr.ErrorForCode(fr.ErrorCode))
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("node %d: fetch of %s/%d answered %d topics", id, topic, p, len(fr.Topics))
	}
	rp := fr.Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		return rp, fmt.Errorf("node %d: fetch %s/%d at %d: %w", id, topic, p, offset, kerr.ErrorForCode(rp.ErrorCode))
	}
	return rp, nil
}

// logEnd is node id's high watermark of partition p (a follower's is its
// log end: it applies only committed entries).
func (c *Cluster) logEnd(ctx context.Context, id int, topic string, topicID [16]byte, p int32) (int64, error) {
	rp, err := c.fetchOnce(ctx, id, topic, topicID, p, 0, 1)
	if err != nil {
		return 0, err
	}
	return rp.HighWatermark, nil
}

// WaitLogsConverge waits until every broker reports the same log end for
// each partition, unchanged over two polls, and returns the ends.
func (c *Cluster) WaitLogsConverge(ctx context.Context, topic string, topicID [16]byte, partitions int32, timeout time.Duration) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var prev map[int32]int64
	for {
		ends, err := c.agreedEnds(ctx, topic, topicID, partitions)
		if err == nil && prev != nil && mapsEqual(prev, ends) {
			return ends, nil
		}
		prev = ends
		if ctx.Err() != nil {
			return nil, fmt.Errorf("replica logs did not converge within %v: %v", timeout, err)
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

func (c *Cluster) agreedEnds(ctx context.Context, topic string, topicID [16]byte, partitions int32) (map[int32]int64, error) {
	ends := map[int32]int64{}
	for p := range partitions {
		for _, n := range c.Nodes {
			end, err := c.logEnd(ctx, n.ID, topic, topicID, p)
			if err != nil {
				return nil, err
			}
			if prev, ok := ends[p]; ok && prev != end {
				return nil, fmt.Errorf("%s/%d: log end %d on node %d, %d on node 0", topic, p, end, n.ID, prev)
			}
			ends[p] = end
		}
	}
	return ends, nil
}

func mapsEqual(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// ReadReplicaLog reads node id's copy of partition p from its start up
// to end, decoding every batch (CRC checked).
func (c *Cluster) ReadReplicaLog(ctx context.Context, id int, topic string, topicID [16]byte, p int32, end int64) ([]logRecord, error) {
	return readReplica(ctx, c, id, topic, topicID, p, end, decodeBatches, func(r logRecord) int64 { return r.Offset })
}

// readReplica reads node id's copy of partition p from its start up to
// end, fetch after fetch, decoding each answer's complete batches with
// decode (which returns the offset to fetch next) and keeping the items
// whose offset (at) is below end.
func readReplica[T any](ctx context.Context, c *Cluster, id int, topic string, topicID [16]byte, p int32, end int64,
	decode func(data []byte, from int64) ([]T, int64, error), at func(T) int64) ([]T, error) {
	var out []T
	offset := int64(0)
	for round := 0; offset < end; round++ {
		if round == maxFetchRounds {
			return nil, fmt.Errorf("node %d: %s/%d: still at offset %d of %d after %d fetches", id, topic, p, offset, end, round)
		}
		rp, err := c.fetchOnce(ctx, id, topic, topicID, p, offset, 8<<20)
		if errors.Is(err, kerr.OffsetOutOfRange) && offset == 0 && rp.LogStartOffset > 0 {
			offset = rp.LogStartOffset
			continue
		}
		if err != nil {
			return nil, err
		}
		items, next, err := decode(rp.RecordBatches, offset)
		if err != nil {
			return nil, fmt.Errorf("node %d: %s/%d at offset %d: %w", id, topic, p, offset, err)
		}
		if next <= offset {
			return nil, fmt.Errorf("node %d: %s/%d: no records at offset %d below its end %d", id, topic, p, offset, end)
		}
		for _, it := range items {
			if at(it) < end {
				out = append(out, it)
			}
		}
		offset = next
	}
	return out, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// decodeBatches decodes the complete record batches in data (a trailing
// partial batch, cut by the fetch size, is left for the next fetch) and
// returns the data records at or after from and the offset after the
// last batch.
func decodeBatches(data []byte, from int64) ([]logRecord, int64, error) {
	var out []logRecord
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
		next = max(next, batch.FirstOffset+int64(batch.LastOffsetDelta)+1)
		if batch.Attributes&0x20 != 0 { // control batch: no data records
			continue
		}
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
			if off := batch.FirstOffset + int64(r.OffsetDelta); off >= from {
				out = append(out, logRecord{Offset: off, Value: string(r.Value)})
			}
		}
	}
	return out, next, nil
}

// TopicID is topic's id as broker 0's Metadata gives it.
func (c *Cluster) TopicID(ctx context.Context, topic string) ([16]byte, error) {
	md, err := c.firstAnswer(ctx, []string{topic})
	if err != nil {
		return [16]byte{}, err
	}
	for _, t := range md.Topics {
		if derefStr(t.Topic) == topic && t.ErrorCode == 0 {
			return t.TopicID, nil
		}
	}
	return [16]byte{}, fmt.Errorf("Metadata does not know topic %s", topic)
}
