package kafka

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// inlineRecordBytes: record sets smaller than this are copied into the
// response's own bytes; larger ones are sent from their own (possibly
// shared) buffer, so that one buffer serves every consumer of a coalesced
// read without a copy per consumer, at the cost of one more iovec.
const inlineRecordBytes = 512

// fetchEncoder writes a FetchResponse body as net.Buffers: the response's
// own fields in one buffer it keeps between responses, the record batches
// as the caller's buffers themselves. The bytes equal kmsg's
// FetchResponse.AppendTo for every version weir serves
// (fetch_encode_test.go pins this), except that unknown tagged fields,
// which weir never sets, are not written.
type fetchEncoder struct {
	head []byte       // the response's own bytes, appended to
	gaps []recordsGap // record sets sent from their own buffers, in order
	bufs net.Buffers  // the pieces finish hands out
}

// recordsGap is a record set sent from its own buffer right after the
// first at bytes of head.
type recordsGap struct {
	at   int
	recs []byte
}

// reset starts a new response whose own bytes begin with header.
func (e *fetchEncoder) reset(header []byte) {
	e.head = append(e.head[:0], header...)
	e.gaps = e.gaps[:0]
	e.bufs = e.bufs[:0]
}

// records appends a record set: its length prefix, then its bytes, inline
// when small, else as a piece of its own.
func (e *fetchEncoder) records(recs []byte, flexible bool) {
	if flexible {
		e.head = kbin.AppendUvarint(e.head, uint32(len(recs)+1))
	} else {
		e.head = binary.BigEndian.AppendUint32(e.head, uint32(len(recs)))
	}
	if len(recs) < inlineRecordBytes {
		e.head = append(e.head, recs...)
		return
	}
	e.gaps = append(e.gaps, recordsGap{at: len(e.head), recs: recs})
}

// finish returns the pieces: head cut at the gaps, with the record sets
// in between. They stay valid until the next reset; release drops the
// references to the record buffers.
func (e *fetchEncoder) finish() net.Buffers {
	prev := 0
	for _, g := range e.gaps {
		if g.at > prev {
			e.bufs = append(e.bufs, e.head[prev:g.at])
		}
		e.bufs = append(e.bufs, g.recs)
		prev = g.at
	}
	if len(e.head) > prev {
		e.bufs = append(e.bufs, e.head[prev:])
	}
	return e.bufs
}

// release drops the references to the record buffers and, if one large
// response grew the head past 1 MiB, the head itself.
func (e *fetchEncoder) release() {
	clear(e.gaps)
	clear(e.bufs)
	if cap(e.head) > 1<<20 {
		e.head = nil
	}
}

// encode appends resp's body (no response header).
func (e *fetchEncoder) encode(resp *kmsg.FetchResponse) {
	version := resp.Version
	flexible := version >= 12
	h := e.head
	h = binary.BigEndian.AppendUint32(h, uint32(resp.ThrottleMillis))
	if version >= 7 {
		h = binary.BigEndian.AppendUint16(h, uint16(resp.ErrorCode))
		h = binary.BigEndian.AppendUint32(h, uint32(resp.SessionID))
	}
	h = appendArrayLen(h, len(resp.Topics), flexible)
	e.head = h
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		h := e.head
		if version <= 12 {
			h = appendString(h, t.Topic, flexible)
		} else {
			h = append(h, t.TopicID[:]...)
		}
		h = appendArrayLen(h, len(t.Partitions), flexible)
		e.head = h
		for pi := range t.Partitions {
			e.partition(&t.Partitions[pi], version, flexible)
		}
		if flexible {
			e.head = append(e.head, 0) // no tagged fields
		}
	}
	if !flexible {
		return
	}
	h = e.head
	if len(resp.Brokers) == 0 {
		e.head = append(h, 0)
		return
	}
	h = append(h, 1, 0) // one tagged field: 0, the node endpoints
	var body []byte
	body = appendArrayLen(body, len(resp.Brokers), true)
	for _, b := range resp.Brokers {
		body = binary.BigEndian.AppendUint32(body, uint32(b.NodeID))
		body = appendString(body, b.Host, true)
		body = binary.BigEndian.AppendUint32(body, uint32(b.Port))
		body = appendNullableString(body, b.Rack)
		body = append(body, 0)
	}
	h = kbin.AppendUvarint(h, uint32(len(body)))
	e.head = append(h, body...)
}

func (e *fetchEncoder) partition(p *kmsg.FetchResponseTopicPartition, version int16, flexible bool) {
	h := e.head
	h = binary.BigEndian.AppendUint32(h, uint32(p.Partition))
	h = binary.BigEndian.AppendUint16(h, uint16(p.ErrorCode))
	h = binary.BigEndian.AppendUint64(h, uint64(p.HighWatermark))
	h = binary.BigEndian.AppendUint64(h, uint64(p.LastStableOffset))
	if version >= 5 {
		h = binary.BigEndian.AppendUint64(h, uint64(p.LogStartOffset))
	}
	if p.AbortedTransactions == nil {
		h = appendNullArrayLen(h, flexible)
	} else {
		h = appendArrayLen(h, len(p.AbortedTransactions), flexible)
		for _, a := range p.AbortedTransactions {
			h = binary.BigEndian.AppendUint64(h, uint64(a.ProducerID))
			h = binary.BigEndian.AppendUint64(h, uint64(a.FirstOffset))
			if flexible {
				h = append(h, 0)
			}
		}
	}
	if version >= 11 {
		h = binary.BigEndian.AppendUint32(h, uint32(p.PreferredReadReplica))
	}
	e.head = h
	e.records(p.RecordBatches, flexible)
	if !flexible {
		return
	}
	h = e.head
	diverging := p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1
	leader := p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1
	snapshot := p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1
	h = kbin.AppendUvarint(h, uint32(count(diverging, leader, snapshot)))
	if diverging {
		h = append(h, 0, 13) // tag 0, 4+8 bytes + empty tags
		h = binary.BigEndian.AppendUint32(h, uint32(p.DivergingEpoch.Epoch))
		h = binary.BigEndian.AppendUint64(h, uint64(p.DivergingEpoch.EndOffset))
		h = append(h, 0)
	}
	if leader {
		h = append(h, 1, 9) // tag 1, 4+4 bytes + empty tags
		h = binary.BigEndian.AppendUint32(h, uint32(p.CurrentLeader.LeaderID))
		h = binary.BigEndian.AppendUint32(h, uint32(p.CurrentLeader.LeaderEpoch))
		h = append(h, 0)
	}
	if snapshot {
		h = append(h, 2, 13) // tag 2, 8+4 bytes + empty tags
		h = binary.BigEndian.AppendUint64(h, uint64(p.SnapshotID.EndOffset))
		h = binary.BigEndian.AppendUint32(h, uint32(p.SnapshotID.Epoch))
		h = append(h, 0)
	}
	e.head = h
}

func count(flags ...bool) int {
	n := 0
	for _, f := range flags {
		if f {
			n++
		}
	}
	return n
}

func appendArrayLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return kbin.AppendUvarint(dst, uint32(n+1))
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

func appendNullArrayLen(dst []byte, flexible bool) []byte {
	if flexible {
		return append(dst, 0)
	}
	return binary.BigEndian.AppendUint32(dst, 0xffffffff)
}

func appendString(dst []byte, s string, flexible bool) []byte {
	if flexible {
		dst = kbin.AppendUvarint(dst, uint32(len(s)+1))
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	}
	return append(dst, s...)
}

// appendNullableString is the compact (flexible) form.
func appendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, 0)
	}
	return appendString(dst, *s, true)
}
