package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression levels a topic's compression.<codec>.level may take, with
// Kafka's defaults (KIP-390).
const (
	GzipLevelDefault = -1 // Deflater.DEFAULT_COMPRESSION
	GzipLevelMin     = 1
	GzipLevelMax     = 9
	LZ4LevelDefault  = 9
	LZ4LevelMin      = 1
	LZ4LevelMax      = 17
	ZstdLevelDefault = 3
	ZstdLevelMin     = -131072
	ZstdLevelMax     = 22
)

// DefaultLevel is Kafka's default level of codec (0 for those without
// levels).
func DefaultLevel(codec int8) int {
	switch codec {
	case CompressionGzip:
		return GzipLevelDefault
	case CompressionLZ4:
		return LZ4LevelDefault
	case CompressionZstd:
		return ZstdLevelDefault
	}
	return 0
}

// Compressors re-encodes produced batches in the codec a topic's
// compression.type names. It keeps what is costly to set up (zstd
// encoders, gzip and lz4 writers) for the next batch; it is safe for
// concurrent use. The zero value is ready.
type Compressors struct {
	mu   sync.Mutex
	zstd map[zstd.EncoderLevel]*zstd.Encoder
	gzip map[int]*sync.Pool // of *gzip.Writer, by level
	lz4  map[lz4.CompressionLevel]*sync.Pool
}

// Recompress returns batch with its records encoded by codec at level
// (the codec's compression.<codec>.level; ignored by snappy and
// uncompressed): the same header, so offsets, producer id, epoch and
// sequence, timestamps and record count are unchanged, with the codec
// bits, the length and the CRC of the new encoding. records is the batch's
// records section, as BatchRecords returns it. This is what Kafka's
// LogValidator does to a batch whose codec is not the topic's.
func (c *Compressors) Recompress(batch, records []byte, codec int8, level int) ([]byte, error) {
	if len(batch) < batchHeaderLen {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptBatch, len(batch))
	}
	out := make([]byte, batchHeaderLen, batchHeaderLen+len(records)/2+64)
	copy(out, batch[:batchHeaderLen])
	var err error
	if out, err = c.appendCompressed(out, codec, level, records); err != nil {
		return nil, fmt.Errorf("log: compress with codec %d: %w", codec, err)
	}
	attrs := binary.BigEndian.Uint16(out[offAttributes:])&^attrCompressionMask | uint16(codec)
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	return finishBatch(out, 0), nil
}

// appendCompressed appends data encoded by codec to dst.
func (c *Compressors) appendCompressed(dst []byte, codec int8, level int, data []byte) ([]byte, error) {
	switch codec {
	case CompressionNone:
		return append(dst, data...), nil
	case CompressionSnappy:
		enc, err := compress(CompressionSnappy, data)
		return append(dst, enc...), err
	case CompressionZstd:
		enc, err := c.zstdEncoder(zstd.EncoderLevelFromZstd(level))
		if err != nil {
			return dst, err
		}
		return enc.EncodeAll(data, dst), nil
	case CompressionGzip:
		if level != GzipLevelDefault && (level < GzipLevelMin || level > GzipLevelMax) {
			return dst, fmt.Errorf("gzip level %d", level)
		}
		buf := bytes.NewBuffer(dst)
		pool := writerPool(c, &c.gzip, level)
		w, _ := pool.Get().(*gzip.Writer)
		if w == nil {
			var err error
			if w, err = gzip.NewWriterLevel(buf, level); err != nil {
				return dst, err
			}
		} else {
			w.Reset(buf)
		}
		defer pool.Put(w)
		return finishWriter(buf, w, data)
	case CompressionLZ4:
		lvl := lz4Level(level)
		buf := bytes.NewBuffer(dst)
		pool := writerPool(c, &c.lz4, lvl)
		w, _ := pool.Get().(*lz4.Writer)
		if w == nil {
			w = lz4.NewWriter(buf)
			if err := w.Apply(lz4.CompressionLevelOption(lvl)); err != nil {
				return dst, err
			}
		} else {
			w.Reset(buf)
		}
		defer pool.Put(w)
		return finishWriter(buf, w, data)
	}
	return dst, fmt.Errorf("unknown codec %d", codec)
}

type flushingWriter interface {
	Write([]byte) (int, error)
	Close() error
}

func finishWriter(buf *bytes.Buffer, w flushingWriter, data []byte) ([]byte, error) {
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// lz4Level maps Kafka's compression.lz4.level to the lz4 library's: Kafka
// uses lz4's fast compressor at its default level 9 and the high
// compression one at every other level, whose depth the library offers
// in nine steps (levels above 9 compress as 9 does).
func lz4Level(level int) lz4.CompressionLevel {
	switch {
	case level == LZ4LevelDefault:
		return lz4.Fast
	case level < LZ4LevelMin:
		return lz4.Level1
	case level > 9:
		return lz4.Level9
	}
	return lz4.Level1 << (level - 1)
}

func (c *Compressors) zstdEncoder(level zstd.EncoderLevel) (*zstd.Encoder, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if enc := c.zstd[level]; enc != nil {
		return enc, nil
	}
	// One encoder per level serves every caller: EncodeAll may be
	// called concurrently.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(level))
	if err != nil {
		return nil, err
	}
	if c.zstd == nil {
		c.zstd = map[zstd.EncoderLevel]*zstd.Encoder{}
	}
	c.zstd[level] = enc
	return enc, nil
}

// writerPool returns the writer pool of one level, making it on first
// use.
func writerPool[L comparable](c *Compressors, pools *map[L]*sync.Pool, level L) *sync.Pool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *pools == nil {
		*pools = map[L]*sync.Pool{}
	}
	p := (*pools)[level]
	if p == nil {
		p = &sync.Pool{}
		(*pools)[level] = p
	}
	return p
}

// Close releases the zstd encoders.
func (c *Compressors) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, enc := range c.zstd {
		enc.Close()
	}
	c.zstd = nil
}
