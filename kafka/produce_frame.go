package kafka

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

// Reading a produce request's record sets straight into their Raft
// entries.
//
// A produce request's records are the bulk of what a broker reads, and
// each produced batch becomes a Raft entry: a few bytes of header, then
// the records. Read into the frame, the records would be copied again
// into the entry, every produced byte once more (about a tenth of a busy
// broker's CPU). So a large produce frame is read as it is parsed: each
// record set of splitRecordsMin bytes or more goes straight from the
// socket into a buffer of its own with room for the entry's header before
// it (broker.ProduceBuffer), and the frame keeps everything else, that
// record set written as an empty one, for kmsg to decode as usual. The
// handler then puts the buffers back in place (splitProduce.restore) and
// hands each to the broker with its batch (broker.ProduceOptions.Entry).
//
// Only versions 3 to 13 are read this way, and only frames of
// splitFrameMin bytes or more; a frame that does not parse is refused as
// a malformed request, as kmsg would refuse it.

const (
	// splitFrameMin is the smallest produce frame read as it is parsed.
	splitFrameMin = 16 << 10
	// splitRecordsMin is the smallest record set read into a buffer of
	// its own: a smaller one costs less to copy than the buffer.
	splitRecordsMin = 4 << 10
	// splitFrameStart is the frame a split produce request starts with.
	splitFrameStart = 16 << 10
	// produceFlexible is the first flexible Produce version.
	produceFlexible = 9
	// produceTopicIDs is the first Produce version naming topics by id.
	produceTopicIDs = 13
)

// splitProduce is what a produce frame read by readProduceFrame holds
// outside it: per partition, in request order, the buffer its records
// were read into, or nil where they stayed in the frame.
type splitProduce struct {
	entries [][]byte
}

// errMalformedProduce is a produce frame that does not parse.
var errMalformedProduce = errors.New("malformed produce request")

// frameReader copies a frame from r into out field by field, with left
// bytes of the frame still to read.
type frameReader struct {
	r    *bufio.Reader
	left int
	out  []byte
	err  error
}

func (f *frameReader) fail(what string) {
	if f.err == nil {
		f.err = fmt.Errorf("%w: %s", errMalformedProduce, what)
	}
}

// take reads k bytes of the frame into out and returns them.
func (f *frameReader) take(k int, what string) []byte {
	if f.err != nil {
		return nil
	}
	if k < 0 || k > f.left {
		f.fail(what)
		return nil
	}
	start := len(f.out)
	f.out = slices.Grow(f.out, k)[:start+k]
	if _, err := io.ReadFull(f.r, f.out[start:]); err != nil {
		f.err = err
		return nil
	}
	f.left -= k
	return f.out[start:]
}

func (f *frameReader) int16(what string) int16 {
	if b := f.take(2, what); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (f *frameReader) int32(what string) int32 {
	if b := f.take(4, what); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

// uvarint reads an unsigned varint of at most 5 bytes (every length and
// count in a Kafka request fits in 32 bits).
func (f *frameReader) uvarint(what string) uint64 {
	var v uint64
	for i := 0; i < 5; i++ {
		b := f.take(1, what)
		if b == nil {
			return 0
		}
		v |= uint64(b[0]&0x7f) << (7 * i)
		if b[0] < 0x80 {
			return v
		}
	}
	f.fail(what)
	return 0
}

// length reads a compact (flexible) or classic length prefix: -1 for
// null.
func (f *frameReader) length(flexible bool, what string) int {
	if flexible {
		return int(f.uvarint(what)) - 1
	}
	return int(f.int32(what))
}

// stringField reads a nullable string (compact when flexible).
func (f *frameReader) stringField(flexible bool, what string) {
	n := 0
	if flexible {
		n = int(f.uvarint(what)) - 1
	} else {
		n = int(f.int16(what))
	}
	if n > 0 {
		f.take(n, what)
	}
}

// tags reads a tagged-fields section.
func (f *frameReader) tags() {
	n := f.uvarint("tag count")
	for i := uint64(0); i < n && f.err == nil; i++ {
		f.uvarint("tag")
		f.take(int(f.uvarint("tag size")), "tag")
	}
}

// count reads an array length; null and empty are 0, and each element
// takes at least minSize bytes of what is left.
func (f *frameReader) count(flexible bool, minSize int, what string) int {
	n := f.length(flexible, what)
	if n < 0 {
		return 0
	}
	if n > f.left/minSize {
		f.fail(what)
		return 0
	}
	return n
}

// readProduceFrame reads a produce request of n bytes, the size prefix
// already read, from r into frame (grown when it has too little room),
// reading each record set of splitRecordsMin bytes or more into a buffer
// from alloc instead (records at [headroom:]). On an error nothing from
// alloc is kept: release has them back.
func readProduceFrame(r *bufio.Reader, n int, frame []byte, headroom int, alloc func(int) []byte, release func([]byte)) (_ []byte, _ *splitProduce, err error) {
	f := &frameReader{r: r, left: n, out: frame[:0]}
	split := &splitProduce{}
	defer func() {
		if err != nil {
			for _, e := range split.entries {
				if e != nil {
					release(e)
				}
			}
		}
	}()
	f.int16("api key")
	version := f.int16("api version")
	f.int32("correlation id")
	f.stringField(false, "client id") // request headers keep a classic string
	flexible := version >= produceFlexible
	if flexible {
		f.tags()
	}
	f.stringField(flexible, "transactional id")
	f.int16("acks")
	f.int32("timeout")
	topics := f.count(flexible, 2, "topics")
	for t := 0; t < topics && f.err == nil; t++ {
		if version >= produceTopicIDs {
			f.take(16, "topic id")
		} else {
			f.stringField(flexible, "topic")
		}
		partitions := f.count(flexible, 5, "partitions")
		for p := 0; p < partitions && f.err == nil; p++ {
			f.int32("partition")
			split.entries = append(split.entries, f.records(flexible, headroom, alloc))
			if flexible {
				f.tags()
			}
		}
		if flexible {
			f.tags()
		}
	}
	if flexible {
		f.tags()
	}
	switch {
	case f.err != nil:
		return nil, nil, f.err
	case f.left != 0:
		return nil, nil, fmt.Errorf("%w: %d bytes after the request", errMalformedProduce, f.left)
	}
	return f.out, split, nil
}

// records reads one partition's record set: into the frame, or, when it
// is large, into a buffer from alloc that it returns, the frame getting
// an empty record set in its place.
func (f *frameReader) records(flexible bool, headroom int, alloc func(int) []byte) []byte {
	start := len(f.out)
	n := f.length(flexible, "records length")
	if f.err != nil || n < splitRecordsMin {
		if n > 0 {
			f.take(n, "records")
		}
		return nil
	}
	if n > f.left {
		f.fail("records")
		return nil
	}
	f.out = f.out[:start]
	if flexible {
		f.out = append(f.out, 1) // compact length 0
	} else {
		f.out = binary.BigEndian.AppendUint32(f.out, 0)
	}
	buf := alloc(n)
	if _, err := io.ReadFull(f.r, buf[headroom:]); err != nil {
		f.err = err
		return buf // released with the others
	}
	f.left -= n
	return buf
}

// produceBuffers is where the buffers of a split frame come from and go
// back to (the broker's produce path).
type produceBuffers interface {
	ProduceBuffer(n int) []byte
	ReleaseProduceBuffer(buf []byte)
}

// restore puts the record sets read outside the frame back into the
// decoded request and hands their buffers over: per partition in request
// order, its buffer or nil (nil for a request read whole).
func (s *splitProduce) restore(req *kmsg.ProduceRequest) ([][]byte, error) {
	if s == nil {
		return nil, nil
	}
	k := 0
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			if k == len(s.entries) {
				return nil, fmt.Errorf("%w: %d partitions read, more decoded", errMalformedProduce, len(s.entries))
			}
			if e := s.entries[k]; e != nil {
				req.Topics[i].Partitions[j].Records = e[broker.EntryHeadroom:]
			}
			k++
		}
	}
	if k != len(s.entries) {
		return nil, fmt.Errorf("%w: %d partitions read, %d decoded", errMalformedProduce, len(s.entries), k)
	}
	entries := s.entries
	s.entries = nil
	return entries, nil
}

// release gives back the buffers not handed over.
func (s *splitProduce) release(to produceBuffers) {
	if s == nil {
		return
	}
	for _, e := range s.entries {
		if e != nil {
			to.ReleaseProduceBuffer(e)
		}
	}
	s.entries = nil
}
