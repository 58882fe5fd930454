package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxDecompressed bounds decompression so a hostile batch cannot exhaust
// memory; the log only decompresses to look at record timestamps.
const maxDecompressed = 256 << 20

// xerialMagic starts snappy data framed by the Java xerial library, which
// the Java client uses: 8-byte magic, version i32, compatible version i32,
// then blocks of (length i32, raw snappy block).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func readLimited(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDecompressed {
		return nil, fmt.Errorf("decompressed size exceeds %d bytes", maxDecompressed)
	}
	return b, nil
}

func decompress(codec int8, data []byte) ([]byte, error) {
	switch codec {
	case CompressionNone:
		return data, nil
	case CompressionGzip:
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return readLimited(r)
	case CompressionSnappy:
		if !bytes.HasPrefix(data, xerialMagic) {
			return snappyBlock(nil, data)
		}
		if len(data) < 16 {
			return nil, fmt.Errorf("short xerial header")
		}
		var out []byte
		for rest := data[16:]; len(rest) > 0; {
			if len(rest) < 4 {
				return nil, fmt.Errorf("torn xerial block length")
			}
			n := int(binary.BigEndian.Uint32(rest))
			if n < 0 || n > len(rest)-4 {
				return nil, fmt.Errorf("xerial block length %d exceeds data", n)
			}
			var err error
			if out, err = snappyBlock(out, rest[4:4+n]); err != nil {
				return nil, err
			}
			rest = rest[4+n:]
		}
		return out, nil
	case CompressionLZ4:
		return readLimited(lz4.NewReader(bytes.NewReader(data)))
	case CompressionZstd:
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.DecodeAll(data, nil)
	}
	return nil, fmt.Errorf("unknown codec %d", codec)
}

// snappyBlock appends one decoded raw snappy block to dst.
func snappyBlock(dst, src []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > maxDecompressed-len(dst) {
		return nil, fmt.Errorf("decompressed size exceeds %d bytes", maxDecompressed)
	}
	dec, err := snappy.Decode(nil, src)
	if err != nil {
		return nil, err
	}
	return append(dst, dec...), nil
}

// forEachRecord reports each record's absolute offset and timestamp.
func forEachRecord(batch []byte, fn func(offset, ts int64) bool) error {
	return ForEachRecord(batch, func(r Record) bool { return fn(r.Offset, r.Timestamp) })
}

// compress encodes records data with codec, as Kafka's producers frame it:
// snappy in the xerial framing the Java client reads and writes, lz4 as an
// LZ4 frame. The cleaner uses it to recompress the batches it rewrites.
func compress(codec int8, data []byte) ([]byte, error) {
	switch codec {
	case CompressionNone:
		return data, nil
	case CompressionGzip:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CompressionSnappy:
		const block = 32 << 10 // the Java client's default block size
		out := append([]byte(nil), xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // compatible version
		for rest := data; len(rest) > 0; {
			n := min(len(rest), block)
			enc := snappy.Encode(nil, rest[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
			out = append(out, enc...)
			rest = rest[n:]
		}
		return out, nil
	case CompressionLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CompressionZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, err
		}
		return enc.EncodeAll(data, nil), nil
	}
	return nil, fmt.Errorf("unknown codec %d", codec)
}

// zstdEncoder is shared: EncodeAll may be called concurrently, and an
// encoder is costly to set up.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})
