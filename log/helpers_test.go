package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

type testRecord struct {
	ts    int64
	value []byte
}

// encodeBatch builds a RecordBatch v2 the way a producer would (base offset
// 0, epoch -1), optionally compressed.
func encodeBatch(tb testing.TB, codec int8, recs ...testRecord) []byte {
	tb.Helper()
	firstTs, maxTs := recs[0].ts, recs[0].ts
	var body []byte
	for i, r := range recs {
		maxTs = max(maxTs, r.ts)
		rec := []byte{0}
		rec = binary.AppendVarint(rec, r.ts-firstTs)
		rec = binary.AppendVarint(rec, int64(i))
		rec = binary.AppendVarint(rec, -1) // null key
		rec = binary.AppendVarint(rec, int64(len(r.value)))
		rec = append(rec, r.value...)
		rec = binary.AppendVarint(rec, 0) // no headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	body = compressForTest(tb, codec, body)
	b := make([]byte, batchHeaderLen, batchHeaderLen+len(body))
	binary.BigEndian.PutUint32(b[offLength:], uint32(batchHeaderLen-batchPrefixLen+len(body)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(codec))
	binary.BigEndian.PutUint32(b[offLastOffsetDelt:], uint32(len(recs)-1))
	binary.BigEndian.PutUint64(b[offFirstTimestamp:], uint64(firstTs))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[offProducerID:], 0xffffffffffffffff)
	binary.BigEndian.PutUint16(b[offProducerEpoch:], 0xffff)
	binary.BigEndian.PutUint32(b[offBaseSequence:], 0xffffffff)
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(recs)))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
	return b
}

func compressForTest(tb testing.TB, codec int8, body []byte) []byte {
	var buf bytes.Buffer
	switch codec {
	case CompressionNone:
		return body
	case CompressionGzip:
		w := gzip.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case CompressionSnappy:
		// xerial framing, as the Java client writes it.
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 100) // several blocks to exercise the loop
			blk := snappy.Encode(nil, rest[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(blk))))
			buf.Write(blk)
			rest = rest[n:]
		}
	case CompressionLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case CompressionZstd:
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			tb.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(body, nil)
	}
	return buf.Bytes()
}

// simpleBatch is an uncompressed batch of n records with the given
// timestamp and values of size valueLen.
func simpleBatch(tb testing.TB, n int, ts int64, valueLen int) []byte {
	recs := make([]testRecord, n)
	for i := range recs {
		recs[i] = testRecord{ts: ts, value: bytes.Repeat([]byte{byte('a' + i%26)}, valueLen)}
	}
	return encodeBatch(tb, CompressionNone, recs...)
}

// fakeClock is an injectable Config.Now.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) Now() time.Time   { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Advance(ms int64) { c.ms.Add(ms) }

func testConfig(fsys FS) Config {
	cfg := DefaultConfig()
	cfg.FS = fsys
	cfg.IndexIntervalBytes = 256
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func mustOpen(tb testing.TB, dir string, cfg Config) *Log {
	tb.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return l
}

func mustAppend(tb testing.TB, l *Log, b []byte) AppendResult {
	tb.Helper()
	res, err := l.Append(b, AppendOptions{LeaderEpoch: 3})
	if err != nil {
		tb.Fatalf("Append: %v", err)
	}
	return res
}

// readAll reads every batch from offset to the end, across segments.
func readAll(tb testing.TB, l *Log, from int64) []BatchHeader {
	tb.Helper()
	var out []BatchHeader
	for off := from; off < l.EndOffset(); {
		b, err := l.Read(off, 1<<20, Obligatory, l.EndOffset())
		if err != nil {
			tb.Fatalf("Read(%d): %v", off, err)
		}
		hs, err := ValidateBatches(b)
		if err != nil {
			tb.Fatalf("Read(%d) returned invalid batches: %v", off, err)
		}
		out = append(out, hs...)
		off = hs[len(hs)-1].LastOffset() + 1
	}
	return out
}

// faultFS wraps the OS file system with switchable failures.
type faultFS struct {
	OSFS
	mu         sync.Mutex
	failWrites bool // WriteAt on .log files writes half and fails
	failSync   bool
}

var errInjected = errors.New("injected fault")

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	file, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, isLog: len(name) > 4 && name[len(name)-4:] == ".log"}, nil
}

func (f *faultFS) set(writes, syncs bool) {
	f.mu.Lock()
	f.failWrites, f.failSync = writes, syncs
	f.mu.Unlock()
}

type faultFile struct {
	*os.File
	fs    *faultFS
	isLog bool
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	fail := f.fs.failWrites && f.isLog
	f.fs.mu.Unlock()
	if fail {
		n, _ := f.File.WriteAt(b[:len(b)/2], off)
		return n, errInjected
	}
	return f.File.WriteAt(b, off)
}

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	fail := f.fs.failSync
	f.fs.mu.Unlock()
	if fail {
		return errInjected
	}
	return f.File.Sync()
}
