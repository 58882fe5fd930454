package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Progress reports on the wire.
//
// Every second each follower broker reports the log end of each of its
// replicas to their leaders' brokers, and each leader answers with the
// high watermarks: thousands of entries a second per broker at a few
// thousand partitions, where JSON's encoding and decoding were several
// percent of an idle broker's CPU. Reports and replies are therefore
// binary:
//
//	0x01 | node id (int32, big endian) | entries...
//	entry: group name length (uvarint) | group name | offset (varint)
//
// the report's offsets being log ends, the reply's high watermarks.
// Brokers of earlier versions speak JSON (progressReport, progressReply,
// whose first byte is '{'). A leader answers in the format it was asked
// in, and its JSON answers say that it reads binary ones too, so a
// follower sends JSON to a leader's broker until it has said so, and
// again after a remote error from it (an older broker back at that
// address).
const progressWireV1 = 0x01

// maxProgressGroup bounds a group name in a binary report (Raft group
// names are at most 255 bytes).
const maxProgressGroup = 255

var errProgressWire = errors.New("partition progress: malformed binary message")

// appendProgressHeader starts a binary report or reply from node.
func appendProgressHeader(dst []byte, node int32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, progressWireV1), uint32(node))
}

// appendProgressEntry appends one entry to a binary report or reply.
func appendProgressEntry(dst []byte, group string, offset int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(group)))
	dst = append(dst, group...)
	return binary.AppendVarint(dst, offset)
}

// isBinaryProgress tells a binary report or reply from a JSON one.
func isBinaryProgress(data []byte) bool { return len(data) > 0 && data[0] == progressWireV1 }

// decodeProgress reads a binary report or reply from node, calling fn
// with each entry. A malformed one stops at the first bad entry.
func decodeProgress(data []byte, fn func(node int32, group string, offset int64)) error {
	if len(data) < 5 || data[0] != progressWireV1 {
		return errProgressWire
	}
	node := int32(binary.BigEndian.Uint32(data[1:]))
	for b := data[5:]; len(b) > 0; {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > maxProgressGroup || uint64(len(b)-k) < n {
			return fmt.Errorf("%w: group name", errProgressWire)
		}
		group := string(b[k : k+int(n)])
		b = b[k+int(n):]
		offset, k := binary.Varint(b)
		if k <= 0 {
			return fmt.Errorf("%w: offset", errProgressWire)
		}
		b = b[k:]
		fn(node, group, offset)
	}
	return nil
}

// progressFormats remembers which leader brokers (by RPC address) read
// binary reports.
type progressFormats struct{ binary sync.Map }

func (f *progressFormats) takesBinary(addr string) bool {
	_, ok := f.binary.Load(addr)
	return ok
}

func (f *progressFormats) set(addr string, binary bool) {
	if binary {
		f.binary.Store(addr, true)
	} else {
		f.binary.Delete(addr)
	}
}
