package log

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func TestValidateBatches(t *testing.T) {
	a := simpleBatch(t, 3, 1, 10)
	b := encodeBatch(t, CompressionGzip, testRecord{5, []byte("hello")})
	hs, err := ValidateBatches(append(append([]byte(nil), a...), b...))
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[0].NumRecords != 3 || hs[0].LastOffsetDelta != 2 || hs[1].Compression() != CompressionGzip {
		t.Fatalf("headers %+v", hs)
	}
	if hs[0].Size() != len(a) {
		t.Fatalf("Size %d, want %d", hs[0].Size(), len(a))
	}

	mut := func(f func(b []byte) []byte) []byte {
		c := append([]byte(nil), a...)
		return f(c)
	}
	bad := map[string][]byte{
		"empty":           nil,
		"bad crc":         mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }),
		"bad crc field":   mut(func(b []byte) []byte { b[offCRC] ^= 1; return b }),
		"magic 1":         mut(func(b []byte) []byte { b[offMagic] = 1; return b }),
		"truncated":       mut(func(b []byte) []byte { return b[:len(b)-1] }),
		"header only":     mut(func(b []byte) []byte { return b[:40] }),
		"trailing":        mut(func(b []byte) []byte { return append(b, 0, 0, 0) }),
		"partial second":  mut(func(b []byte) []byte { return append(b, a[:70]...) }),
		"length too long": mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLength:], 1<<31-1); return b }),
		"length short":    mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLength:], 10); return b }),
		"count mismatch": mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordCount:], 2)
			return resum(b)
		}),
		"zero records": mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordCount:], 0)
			binary.BigEndian.PutUint32(b[offLastOffsetDelt:], 0xffffffff)
			return resum(b)
		}),
		"codec 7": mut(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[offAttributes:], 7)
			return resum(b)
		}),
	}
	for name, in := range bad {
		if _, err := ValidateBatches(in); !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("%s: err %v, want ErrCorruptBatch", name, err)
		}
		// ParseBatches refuses the same, the checksums aside, and
		// returns the same headers otherwise.
		_, err := ParseBatches(in)
		crcOnly := name == "bad crc" || name == "bad crc field"
		if crcOnly != (err == nil) {
			t.Errorf("ParseBatches %s: err %v", name, err)
		}
		if err := CheckCRC(in); crcOnly && !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("CheckCRC %s: err %v, want ErrCorruptBatch", name, err)
		}
	}
	both := append(append([]byte(nil), a...), b...)
	if err := CheckCRC(both); err != nil {
		t.Fatalf("CheckCRC of good batches: %v", err)
	}
	parsed, err := ParseBatches(both)
	if err != nil || len(parsed) != len(hs) || parsed[0] != hs[0] || parsed[1] != hs[1] {
		t.Fatalf("ParseBatches: %+v, %v; ValidateBatches: %+v", parsed, err, hs)
	}
}

// resum fixes the CRC after a deliberate header edit so only the edited
// field is wrong.
func resum(b []byte) []byte {
	size := int(binary.BigEndian.Uint32(b[offLength:])) + batchPrefixLen
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:size], crcTable))
	return b
}

func FuzzValidateBatches(f *testing.F) {
	a := simpleBatch(f, 2, 7, 5)
	f.Add(a)
	f.Add(append(append([]byte(nil), a...), a...))
	f.Add(encodeBatch(f, CompressionZstd, testRecord{1, []byte("z")}))
	f.Add(a[:61])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		hs, err := ValidateBatches(in)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("error does not wrap ErrCorruptBatch: %v", err)
			}
			return
		}
		total := 0
		for _, h := range hs {
			total += h.Size()
		}
		if total != len(in) {
			t.Fatalf("accepted %d bytes of %d", total, len(in))
		}
		// Accepted input must also survive record decoding without
		// panicking (errors are fine: records are not validated here).
		for rest := in; len(rest) > 0; {
			h := parseHeader(rest)
			_ = forEachRecord(rest[:h.Size()], func(int64, int64) bool { return true })
			rest = rest[h.Size():]
		}
	})
}

func TestEndOffset(t *testing.T) {
	a := simpleBatch(t, 3, 1, 10) // offsets 0-2
	b := simpleBatch(t, 2, 1, 10)
	binary.BigEndian.PutUint64(b, 3) // offsets 3-4
	both := append(append([]byte(nil), a...), b...)
	for _, tc := range []struct {
		name    string
		records []byte
		want    int64
		ok      bool
	}{
		{"empty", nil, 0, false},
		{"one batch", a, 3, true},
		{"two batches", both, 5, true},
		{"a partial second batch is not counted", both[:len(both)-1], 3, true},
		{"only a partial batch", a[:20], 0, false},
	} {
		if got, ok := EndOffset(tc.records); got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d %v, want %d %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// The CRC covers the attributes onwards: stamping a batch's offset and
// leader epoch keeps the producer's CRC valid, and LogAppendTime, which
// changes attributes and maxTimestamp, gets a new one.
func TestRewriteBatchKeepsTheCRCValid(t *testing.T) {
	b := simpleBatch(t, 3, 1_000, 10)
	crc := binary.BigEndian.Uint32(b[offCRC:])
	rewriteBatch(b, 42, 7, 0)
	if err := CheckCRC(b); err != nil || binary.BigEndian.Uint32(b[offCRC:]) != crc {
		t.Fatalf("CreateTime stamp: %v, CRC %08x (was %08x)", err, binary.BigEndian.Uint32(b[offCRC:]), crc)
	}
	rewriteBatch(b, 42, 7, 5_000)
	if err := CheckCRC(b); err != nil || binary.BigEndian.Uint32(b[offCRC:]) == crc {
		t.Fatalf("LogAppendTime stamp: %v, CRC %08x unchanged", err, crc)
	}
}
