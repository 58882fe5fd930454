package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// copyLog copies src's batches [dst end, upTo) into dst as a catching-up
// replica does: chunk by chunk, keeping the holes src's cleaner left.
func copyLog(t *testing.T, src, dst *Log, upTo int64) {
	t.Helper()
	for range 10_000 {
		from := dst.EndOffset()
		if from >= upTo {
			return
		}
		b, err := src.Read(from, 700, Obligatory, upTo)
		if err != nil {
			t.Fatalf("read source at %d: %v", from, err)
		}
		if len(b) == 0 {
			if err := dst.SkipTo(upTo, src.FirstDirtyOffset()); err != nil {
				t.Fatalf("skip %d -> %d: %v", from, upTo, err)
			}
			continue
		}
		if _, err := dst.AppendCopied(b, src.FirstDirtyOffset()); err != nil {
			t.Fatalf("copy at %d: %v", from, err)
		}
	}
	t.Fatal("copy did not finish")
}

func sameRecords(t *testing.T, what string, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i].Offset != want[i].Offset || !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("%s: record %d is %d %q=%q, want %d %q=%q", what, i, got[i].Offset, got[i].Key, got[i].Value, want[i].Offset, want[i].Key, want[i].Value)
		}
	}
}

// TestCopyCompactedLog: a replica copying a compacted log gets every
// surviving record at its offset, a hole at the end of the range moves its
// end, and the copy survives a reopen and takes new appends after it.
func TestCopyCompactedLog(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	srcCfg := cleanTestConfig(clk, 400)
	src := mustOpen(t, t.TempDir(), srcCfg)
	defer src.Close()
	for i := range 60 {
		clk.Advance(10)
		key := fmt.Appendf(nil, "k%d", i%7)
		if i%13 == 12 {
			key = []byte("last") // written once at 12, 25, 38, 51
		}
		mustAppend(t, src, keyedBatch(t, CompressionNone, 0, -1, -1, -1, clk.Now().UnixMilli(), []kv{{key, fmt.Appendf(nil, "v%d", i)}}))
	}
	if _, err := src.Clean(context.Background(), CleanOptions{UpTo: src.EndOffset()}); err != nil {
		t.Fatal(err)
	}
	_, want := readAllBatches(t, src)
	// Ends inside holes: before the first survivor (the copy's active
	// segment is still empty there), and after a survivor.
	if want[0].Offset < 2 {
		t.Fatalf("the cleaned source still starts at %d", want[0].Offset)
	}
	holeEnd := int64(-1)
	for i := 1; i < len(want); i++ {
		if want[i].Offset > want[i-1].Offset+1 && want[i].Offset < src.FirstDirtyOffset() {
			holeEnd = want[i].Offset - 1
			break
		}
	}
	if holeEnd < 0 {
		t.Fatalf("the cleaned source has no hole after a survivor below %d", src.FirstDirtyOffset())
	}
	for name, stop := range map[string]int64{"empty_active": want[0].Offset - 1, "written_active": holeEnd} {
		t.Run(name, func(t *testing.T) {
			cfg := cleanTestConfig(clk, 400)
			dir := t.TempDir()
			dst := mustOpen(t, dir, cfg)
			copyLog(t, src, dst, stop)
			if dst.EndOffset() != stop {
				t.Fatalf("end %d after copying up to %d", dst.EndOffset(), stop)
			}
			copyLog(t, src, dst, src.EndOffset())
			_, got := readAllBatches(t, dst)
			sameRecords(t, "copy", got, want)
			if err := dst.Close(); err != nil {
				t.Fatal(err)
			}
			dst = mustOpen(t, dir, cfg)
			defer dst.Close()
			_, got = readAllBatches(t, dst)
			sameRecords(t, "reopened copy", got, want)
			if dst.EndOffset() != src.EndOffset() {
				t.Fatalf("reopened end %d, want %d", dst.EndOffset(), src.EndOffset())
			}
			res := mustAppend(t, dst, keyedBatch(t, CompressionNone, 0, -1, -1, -1, clk.Now().UnixMilli(), []kv{{[]byte("new"), []byte("v")}}))
			if res.BaseOffset != src.EndOffset() {
				t.Fatalf("append after the copy at %d, want %d", res.BaseOffset, src.EndOffset())
			}
		})
	}
}

// TestCopyRefusesGapsAboveSourceCheckpoint: a gap the source's cleaner
// cannot have made (above its checkpoint) is refused, nothing written.
func TestCopyRefusesGapsAboveSourceCheckpoint(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(1_000)
	dst := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 400))
	defer dst.Close()
	b := keyedBatch(t, CompressionNone, 0, -1, -1, -1, 1_000, []kv{{[]byte("k"), []byte("v")}})
	rewriteBatch(b, 5, 0, 0)
	if _, err := dst.AppendCopied(b, 3); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("gap above the checkpoint: %v", err)
	}
	if err := dst.SkipTo(5, 3); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("skip above the checkpoint: %v", err)
	}
	if dst.EndOffset() != 0 || dst.FirstDirtyOffset() != 0 {
		t.Fatalf("refused copy changed the log: end %d, cleaned to %d", dst.EndOffset(), dst.FirstDirtyOffset())
	}
	if _, err := dst.AppendCopied(b, 5); err != nil {
		t.Fatalf("gap below the checkpoint: %v", err)
	}
	if dst.EndOffset() != 6 || dst.FirstDirtyOffset() != 5 {
		t.Fatalf("end %d, cleaned to %d", dst.EndOffset(), dst.FirstDirtyOffset())
	}
}
