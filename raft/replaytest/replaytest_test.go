package replaytest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	entries := []Entry{
		{Index: 1, Term: 1, Type: TypeConfiguration, Data: []byte("conf")},
		{Index: 2, Term: 1, Type: TypeNoop, Data: []byte{}},
		{Index: 5, Term: 3, Type: TypeCommand, Data: []byte{0xC7, 1, 2, 3}},
	}
	b, err := Encode("controller", entries)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode("controller", b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(entries) {
		t.Fatalf("%d entries, want %d", len(got), len(entries))
	}
	for i := range got {
		if got[i].Index != entries[i].Index || got[i].Term != entries[i].Term || got[i].Type != entries[i].Type ||
			string(got[i].Data) != string(entries[i].Data) {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], entries[i])
		}
	}
	if _, err := Decode("partition", b); err == nil {
		t.Fatal("a controller log decoded as a partition log")
	}
	for _, n := range []int{len(b) - 1, len(b) - 30, 12} {
		if _, err := Decode("controller", b[:n]); err == nil {
			t.Fatalf("a log cut to %d bytes decoded", n)
		}
	}
	flipped := append([]byte(nil), b...)
	flipped[len(flipped)-6] ^= 1
	if _, err := Decode("controller", flipped); err == nil || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("a flipped bit: %v, want a CRC error", err)
	}
	if _, err := Encode("controller", []Entry{{Index: 2, Term: 1}, {Index: 2, Term: 1}}); err == nil {
		t.Fatal("a repeated index encoded")
	}
	if _, err := Encode("controller", []Entry{{Index: 2, Term: 2}, {Index: 3, Term: 1}}); err == nil {
		t.Fatal("a term going back encoded")
	}
}

func TestPinnedAndCreateNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.log")
	b, err := Encode("partition", []Entry{{Index: 1, Term: 1, Data: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := CreateNew(path, b); err != nil {
		t.Fatal(err)
	}
	if err := CreateNew(path, []byte("other")); err == nil {
		t.Fatal("CreateNew overwrote a file")
	}
	sum := sha256.Sum256(b)
	if _, err := ReadPinned(path, "partition", hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPinned(path, "partition", ""); err == nil || !strings.Contains(err.Error(), hex.EncodeToString(sum[:])) {
		t.Fatalf("unpinned: %v, want an error naming the checksum", err)
	}
	if err := os.WriteFile(path, append(b, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPinned(path, "partition", hex.EncodeToString(sum[:])); err == nil {
		t.Fatal("a changed log passed its pinned checksum")
	}
}

func TestFirstDiff(t *testing.T) {
	want := "# header\nentry 1 a\n  r ok\nentry 2 b\n  r ok\n"
	if _, _, _, _, ok := FirstDiff(want, want, "entry "); !ok {
		t.Fatal("equal texts differ")
	}
	line, w, g, entry, ok := FirstDiff(want, "# header\nentry 1 a\n  r ok\nentry 2 b\n  r error\n", "entry ")
	if ok || line != 5 || w != "  r ok" || g != "  r error" || entry != "entry 2 b" {
		t.Fatalf("got %d %q %q %q %v", line, w, g, entry, ok)
	}
	if line, _, _, _, ok := FirstDiff(want, want+"entry 3 c\n", "entry "); ok || line != 6 {
		t.Fatalf("a longer text: line %d ok %v", line, ok)
	}
}
