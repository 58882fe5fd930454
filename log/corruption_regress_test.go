package log

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Regression tests for what TestCorruptionRecovery and FuzzRecovery found,
// each on the smallest log that shows it.

// writeSealedLog writes multiSpecs with corruptionConfig and closes the
// log, so every segment but the last is sealed and below the recovery
// point. The first segment holds batches at offsets 0, 3 and 4; its offset
// index has entries for 3 and 4, its time index the one entry (1005, 3).
func writeSealedLog(t *testing.T) (string, Config, dirFiles, []storedBatch) {
	t.Helper()
	dir, cfg, files, batches := writeSealedLogWith(t, corruptionConfig())
	idx, tidx := files[segmentFileName(0, extIndex)], files[segmentFileName(0, extTimeIndex)]
	if len(idx) != indexHeaderLen+2*indexEntryLen || len(tidx) != timeIndexHeaderLen+timeEntryLen ||
		int64(binary.BigEndian.Uint64(tidx[timeIndexHeaderLen:])) != 1005 {
		t.Fatalf("setup: first segment's indexes are %x and %x", idx, tidx)
	}
	return dir, cfg, files, batches
}

func writeSealedLogWith(t *testing.T, cfg Config) (string, Config, dirFiles, []storedBatch) {
	t.Helper()
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg)
	appendSpecs(t, l, multiSpecs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := readDirFiles(t, dir)
	batches := storedBatches(t, files)
	first := segmentFileName(0, extLog)
	if batches[2].file != first || batches[3].file == first {
		t.Fatalf("setup: first segment is not batches 0-2")
	}
	return dir, cfg, files, batches
}

// rewriteFile applies edit to a copy of dir's file name and writes it back.
func rewriteFile(t *testing.T, dir, name string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The CRC starts at attributes, so a damaged baseOffset leaves a valid
// CRC. Recovery took such a batch if its offset went up, and served it
// with a gap before it; the log never has gaps, so a batch that does not
// continue its predecessor is damaged. Both the full scan (the segment
// Open validates) and the walk over a sealed segment's batches after its
// last offset index entry must stop there.
func TestRecoveryRejectsBatchThatSkipsOffsets(t *testing.T) {
	sparse := corruptionConfig()
	sparse.IndexIntervalBytes = 4096 // no entries: the walk covers whole segments
	for _, tc := range []struct {
		name  string
		cfg   Config
		batch int // index into multiSpecs' batches
	}{
		{"scanned segment", corruptionConfig(), 12}, // in the last segment, always scanned
		{"sealed segment", sparse, 2},               // the first segment's last batch
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, cfg, files, batches := writeSealedLogWith(t, tc.cfg)
			victim := batches[tc.batch]
			base := parseHeader(victim.data).BaseOffset
			rewriteFile(t, dir, victim.file, func(b []byte) []byte {
				binary.BigEndian.PutUint64(b[victim.pos+offBaseOffset:], uint64(base+5))
				return b
			})
			files = readDirFiles(t, dir)
			keep, raw := survivors(batches, files)
			l, st := openRecovered(t, dir, cfg, tc.name)
			if want := (logState{end: base, raw: raw}); keep != tc.batch || !st.equal(want) {
				l.Close()
				t.Fatalf("recovered %v, want the %d batches before the one at %d: %v", st, tc.batch, base, want)
			}
			appendAndReopen(t, l, st, dir, cfg, tc.name)
		})
	}
}

// Recovery dropped every later segment whenever it cut anything off a
// segment, even bytes after its last batch: garbage appended to a sealed
// segment lost all the intact segments after it. Later segments go only
// when offsets no longer continue.
func TestRecoveryKeepsSegmentsAfterTrailingGarbage(t *testing.T) {
	dir, cfg, files, batches := writeSealedLog(t)
	first := segmentFileName(0, extLog)
	size := len(files[first])
	rewriteFile(t, dir, first, func(b []byte) []byte { return append(b, 0, 0, 0, 7, 1, 2, 3) })
	// Without a recovery point Open scans the first segment too.
	if err := os.Remove(filepath.Join(dir, recoveryPointFile)); err != nil {
		t.Fatal(err)
	}
	l, st := openRecovered(t, dir, cfg, "garbage after the first segment")
	_, raw := survivors(batches, files)
	if want := (logState{end: endOf(batches, len(batches)), raw: raw}); !st.equal(want) {
		l.Close()
		t.Fatalf("recovered %v, want all %d batches: %v", st, len(batches), want)
	}
	if fi, err := os.Stat(filepath.Join(dir, first)); err != nil || fi.Size() != int64(size) {
		t.Fatalf("first segment: %v, %v; want the garbage cut off (%d bytes)", fi, err, size)
	}
	appendAndReopen(t, l, st, dir, cfg, "garbage after the first segment")
}

// A sealed segment below the recovery point is opened from its indexes,
// which passed a sanity check (ordered, within the file) that damage can
// pass too. A damaged offset index entry then sent reads into the middle
// of a batch, and those offsets could no longer be read; a damaged or
// missing time index entry lowered the segment's largest timestamp, which
// ListOffsets (and retention) trust. Entries now carry a CRC and a sealed
// time index its entry count, so all of these are rebuilt from the log.
func TestRecoveryRebuildsIndexesThatPassedTheSanityCheck(t *testing.T) {
	idxName, tidxName := segmentFileName(0, extIndex), segmentFileName(0, extTimeIndex)
	for _, tc := range []struct {
		name string
		file string
		edit func([]byte) []byte
	}{
		{"offset index entry moved into a batch", idxName, func(b []byte) []byte {
			// Entry 0 (offset 3, position 202) now points 50 bytes
			// into that batch, still before entry 1.
			p := indexHeaderLen + 4
			binary.BigEndian.PutUint32(b[p:], binary.BigEndian.Uint32(b[p:])+50)
			return b
		}},
		{"time index timestamp lowered", tidxName, func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[timeIndexHeaderLen:], 995)
			return b
		}},
		{"time index cut at an entry boundary", tidxName, func(b []byte) []byte {
			return b[:timeIndexHeaderLen]
		}},
		// Found by FuzzRecovery's seed corpus (other-segment-timeindex):
		// a valid file in the wrong place passed every check.
		{"time index of another segment", tidxName, nil},
		{"offset index of another segment", idxName, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, cfg, files, batches := writeSealedLog(t)
			edit := tc.edit
			if edit == nil {
				// Segment 12 holds the LogAppendTime batch (5000) at
				// relative offset 4, which fits the first segment too.
				other := files[segmentFileName(12, filepath.Ext(tc.file))]
				edit = func([]byte) []byte { return other }
			}
			rewriteFile(t, dir, tc.file, edit)
			// openRecovered reads every offset through the index and
			// compares timestamp lookups with a freshly built log.
			l, st := openRecovered(t, dir, cfg, tc.name)
			_, raw := survivors(batches, files)
			if want := (logState{end: endOf(batches, len(batches)), raw: raw}); !st.equal(want) {
				l.Close()
				t.Fatalf("recovered %v, want all %d batches: %v", st, len(batches), want)
			}
			if off, ts, ok, err := l.OffsetForTimestamp(1001); err != nil || !ok || off != 3 || ts != 1005 {
				t.Fatalf("OffsetForTimestamp(1001) = %d, %d, %v, %v; want offset 3 at 1005", off, ts, ok, err)
			}
			appendAndReopen(t, l, st, dir, cfg, tc.name)
		})
	}
}

// Found by FuzzRecovery (testdata/fuzz/FuzzRecovery/crash-*). A sealed
// segment must end exactly where the next one begins (every operation
// keeps segments contiguous), but recovery let bytes appended to it by
// damage extend it:
//
//   - crash-forged-batch-appended-to-sealed-segment: a well-framed batch
//     with a bad CRC, its offsets continuing the segment's, appended to a
//     segment below the recovery point. The walk over the batches after
//     the last index entry reads headers only and took it; the segment
//     then ended past the next one's base, every later segment was
//     dropped and the damaged batch served. Such a segment is now scanned
//     in full.
//   - crash-next-segments-batch-appended-to-sealed-segment: a valid copy
//     of the next segment's first batch (another leader epoch: the CRC
//     does not cover it). The full scan took it too, with the same
//     result. A scan now stops at the next segment's base.
func TestRecoveryCutsBatchAppendedToSealedSegment(t *testing.T) {
	for _, tc := range []struct {
		name       string
		validCRC   bool
		noRecovery bool // Open then validates every segment
	}{
		{"forged batch, below the recovery point", false, false},
		{"valid batch, below the recovery point", true, false},
		{"valid batch, scanned segment", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, cfg, files, batches := writeSealedLog(t)
			last, next := batches[2], batches[3] // offsets 4-8 end the first segment; 9 starts the next
			stray := slices.Clone(next.data)
			binary.BigEndian.PutUint32(stray[offLeaderEpoch:], 77)
			if !tc.validCRC {
				stray = slices.Clone(last.data)
				binary.BigEndian.PutUint64(stray[offBaseOffset:], 9)
				stray[len(stray)-1] ^= 0x40
			}
			rewriteFile(t, dir, last.file, func(b []byte) []byte { return append(b, stray...) })
			if tc.noRecovery {
				if err := os.Remove(filepath.Join(dir, recoveryPointFile)); err != nil {
					t.Fatal(err)
				}
			}
			l, st := openRecovered(t, dir, cfg, tc.name)
			_, raw := survivors(batches, files)
			if want := (logState{end: endOf(batches, len(batches)), raw: raw}); !st.equal(want) {
				l.Close()
				t.Fatalf("recovered %v, want all %d batches: %v", st, len(batches), want)
			}
			appendAndReopen(t, l, st, dir, cfg, tc.name)
		})
	}
}
