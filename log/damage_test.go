package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The damage model shared by the corruption, crash-image and fuzz tests:
// a partition directory's files as bytes, changed the ways failing disks
// and crashes change files, and what recovery must make of the result.

const (
	corruptionRunsEnv = "WEIR_LOG_CORRUPTION_RUNS"
	corruptionSeedEnv = "WEIR_LOG_CORRUPTION_SEED"
)

// corruptionRuns returns the seed and the number of runs of a randomized
// test: def runs and a fresh seed, unless the environment sets either. The
// seed is logged so that a failure can be replayed exactly.
func corruptionRuns(t *testing.T, def int) (seed uint64, runs int) {
	t.Helper()
	runs = def
	if v := os.Getenv(corruptionRunsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", corruptionRunsEnv, v)
		}
		runs = n
	}
	seed = uint64(time.Now().UnixNano())
	if v := os.Getenv(corruptionSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned number", corruptionSeedEnv, v)
		}
		seed = n
	}
	t.Logf("seed %d, %d runs (replay: %s=%d)", seed, runs, corruptionSeedEnv, seed)
	return seed, runs
}

// dirFiles holds a partition directory's files by base name.
type dirFiles map[string][]byte

func readDirFiles(tb testing.TB, dir string) dirFiles {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	files := dirFiles{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// writeTo makes dir hold exactly these files. Files that already have
// the right content are left alone: creating files is the slowest part of
// a corruption run, and most files come back unchanged.
func (f dirFiles) writeTo(tb testing.TB, dir string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	have := readDirFiles(tb, dir)
	for name := range have {
		if _, ok := f[name]; !ok {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	for name, data := range f {
		if old, ok := have[name]; ok && bytes.Equal(old, data) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func (f dirFiles) clone() dirFiles {
	c := make(dirFiles, len(f))
	for name, data := range f {
		c[name] = slices.Clone(data)
	}
	return c
}

func segmentFileName(base int64, ext string) string { return filepath.Base(segmentName("", base, ext)) }

// segmentBases returns the base offsets of the .log files, ascending.
func (f dirFiles) segmentBases() []int64 {
	var bases []int64
	for name := range f {
		if ext := filepath.Ext(name); ext == extLog && len(name) == 20+len(ext) {
			if base, err := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64); err == nil {
				bases = append(bases, base)
			}
		}
	}
	slices.Sort(bases)
	return bases
}

// segmentFiles returns the names of every segment's .log, .index and
// .timeindex file that exists, in segment order.
func (f dirFiles) segmentFiles() []string {
	var names []string
	for _, base := range f.segmentBases() {
		for _, ext := range []string{extLog, extIndex, extTimeIndex} {
			name := segmentFileName(base, ext)
			if _, ok := f[name]; ok {
				names = append(names, name)
			}
		}
	}
	return names
}

// scannedSegments names the .log files Open validates batch by batch (see
// Log.recover): the last segment and every one that may hold data at or
// above the recovery point. The others were fsynced when they were sealed
// and are trusted, as Kafka trusts segments below its recovery point.
func (f dirFiles) scannedSegments() map[string]bool {
	bases := f.segmentBases()
	rp, ok := parseCheckpoint(f[recoveryPointFile])
	if !ok {
		rp = 0
	}
	out := map[string]bool{}
	for i, base := range bases {
		if i == len(bases)-1 || bases[i+1] > rp {
			out[segmentFileName(base, extLog)] = true
		}
	}
	return out
}

// storedBatch is a batch as a segment file holds it.
type storedBatch struct {
	file string // the segment's .log file
	pos  int
	data []byte
}

// storedBatches splits every .log file, which must hold only whole valid
// batches, into its batches in offset order.
func storedBatches(tb testing.TB, f dirFiles) []storedBatch {
	tb.Helper()
	var out []storedBatch
	for _, base := range f.segmentBases() {
		name := segmentFileName(base, extLog)
		pos := 0
		if len(f[name]) == 0 {
			continue
		}
		for _, b := range splitBatches(tb, f[name]) {
			out = append(out, storedBatch{file: name, pos: pos, data: b})
			pos += len(b)
		}
	}
	return out
}

// sameOutsideEpoch reports whether two batches are equal but perhaps for
// partitionLeaderEpoch: the one field covered neither by the CRC (which
// starts at attributes) nor by the offset sequence, so damage confined to
// it cannot be told from a real epoch and is served as stored.
func sameOutsideEpoch(a, b []byte) bool {
	return len(a) == len(b) && len(a) >= batchHeaderLen &&
		bytes.Equal(a[:offLeaderEpoch], b[:offLeaderEpoch]) && bytes.Equal(a[offMagic:], b[offMagic:])
}

// survivors returns how many of batches recovery must keep after the
// files became f, and the bytes it must then serve: every batch up to the
// first one whose bytes in its .log file were changed (beyond its
// partitionLeaderEpoch) or cut off, and none from that one on. The log is
// truncated just before the first damaged batch and later segments are
// dropped, even though they may be intact, because offsets must stay
// contiguous; Kafka's recovery does the same for the segments it recovers
// (LogSegment.recover truncates a segment at its first invalid batch and
// LogLoader.recoverLog then deletes every later segment).
func survivors(batches []storedBatch, f dirFiles) (int, []byte) {
	var raw []byte
	for i, b := range batches {
		cur := f[b.file]
		if len(cur) < b.pos+len(b.data) {
			return i, raw
		}
		got := cur[b.pos : b.pos+len(b.data)]
		if !sameOutsideEpoch(got, b.data) {
			return i, raw
		}
		raw = append(raw, got...)
	}
	return len(batches), raw
}

type damageKind uint8

const (
	cutShort       damageKind = iota // truncate the file at pos
	flipBits                         // flip one to three bits in [pos, pos+n)
	zeroRange                        // zero [pos, pos+n)
	overwriteRange                   // random bytes over [pos, pos+n)
	appendGarbage                    // n random bytes after the end
	appendBatch                      // a copy of the file's first batch after the end
	appendForged                     // a copy of the batch at [pos, pos+n) continuing the offsets, with a wrong CRC
	appendStray                      // a copy of src's first n bytes (the next segment's first batch, valid), another leader epoch in it
)

func (k damageKind) String() string {
	return [...]string{"cut", "flip", "zero", "overwrite", "append-garbage", "append-batch", "append-forged", "append-stray"}[k]
}

// damage is one change to one file. fill seeds the bytes it writes.
type damage struct {
	kind   damageKind
	file   string
	src    string // appendStray: the file the copy comes from
	pos, n int
	fill   uint64
}

func (d damage) String() string {
	if d.src != "" {
		return fmt.Sprintf("%s %s@%d+%d from %s", d.kind, d.file, d.pos, d.n, d.src)
	}
	return fmt.Sprintf("%s %s@%d+%d", d.kind, d.file, d.pos, d.n)
}

// apply changes f[d.file] in place.
func (d damage) apply(f dirFiles) {
	b := f[d.file]
	rng := rand.New(rand.NewPCG(d.fill, uint64(d.kind)))
	switch d.kind {
	case cutShort:
		b = b[:min(d.pos, len(b))]
	case flipBits:
		b = slices.Clone(b)
		for range 1 + rng.IntN(3) {
			i := d.pos + rng.IntN(d.n)
			b[i] ^= 1 << rng.IntN(8)
		}
	case zeroRange:
		b = slices.Clone(b)
		clear(b[d.pos : d.pos+d.n])
	case overwriteRange:
		b = slices.Clone(b)
		for i := d.pos; i < d.pos+d.n; i++ {
			b[i] = byte(rng.Uint32())
		}
	case appendGarbage:
		b = slices.Clone(b)
		for range d.n {
			b = append(b, byte(rng.Uint32()))
		}
	case appendBatch:
		b = append(slices.Clone(b), b[:d.n]...)
	case appendForged:
		forged := slices.Clone(b[d.pos : d.pos+d.n])
		binary.BigEndian.PutUint64(forged[offBaseOffset:], uint64(parseHeader(forged).LastOffset()+1))
		forged[batchHeaderLen+rng.IntN(d.n-batchHeaderLen)] ^= 1 << rng.IntN(8)
		b = append(slices.Clone(b), forged...)
	case appendStray:
		stray := slices.Clone(f[d.src][:d.n])
		binary.BigEndian.PutUint32(stray[offLeaderEpoch:], rng.Uint32())
		b = append(slices.Clone(b), stray...)
	}
	f[d.file] = b
}

// parseBase returns the base offset in a segment file's name.
func parseBase(name string) int64 {
	base, _ := strconv.ParseInt(strings.TrimSuffix(name, filepath.Ext(name)), 10, 64)
	return base
}

// firstBatchSize is the size the first batch header of b claims, or 0.
func firstBatchSize(b []byte) int {
	if len(b) < batchHeaderLen {
		return 0
	}
	return max(parseHeader(b).Size(), 0)
}

// lastFramedBatch returns the position and size of the last batch of b
// reached by following well-framed headers from the start, or ok false.
func lastFramedBatch(b []byte) (pos, size int, ok bool) {
	for p := 0; len(b)-p >= batchHeaderLen; {
		h := parseHeader(b[p:])
		if checkFraming(h, len(b)-p) != nil || h.Size() <= batchHeaderLen {
			break
		}
		pos, size, ok = p, h.Size(), true
		p += h.Size()
	}
	return pos, size, ok
}

// randomDamage picks a file among the segment files and a way to damage
// it. Bytes of a .log file are rewritten in place only where overwrite
// allows; cutting a file short and appending to it are allowed anywhere.
func randomDamage(rng *rand.Rand, f dirFiles, overwrite func(file string) bool) damage {
	names := f.segmentFiles()
	var name string
	if rng.IntN(2) == 0 {
		// Half the damage goes to .log files, which are a third of them.
		var logs []string
		for _, n := range names {
			if filepath.Ext(n) == extLog {
				logs = append(logs, n)
			}
		}
		name = logs[rng.IntN(len(logs))]
	} else {
		name = names[rng.IntN(len(names))]
	}
	size := len(f[name])
	d := damage{file: name, fill: rng.Uint64()}
	kinds := []damageKind{cutShort, appendGarbage}
	if size > 0 && (filepath.Ext(name) != extLog || overwrite(name)) {
		kinds = append(kinds, flipBits, zeroRange, overwriteRange)
	}
	if filepath.Ext(name) == extLog && size >= batchHeaderLen {
		kinds = append(kinds, appendBatch, appendForged)
	}
	if filepath.Ext(name) == extLog {
		// The next segment's first batch, if it has a whole one.
		bases := f.segmentBases()
		if i := slices.Index(bases, parseBase(name)); i >= 0 && i+1 < len(bases) {
			d.src = segmentFileName(bases[i+1], extLog)
			if _, n, ok := lastFramedBatch(f[d.src][:min(len(f[d.src]), firstBatchSize(f[d.src]))]); ok {
				d.n = n
				kinds = append(kinds, appendStray)
			}
		}
	}
	d.kind = kinds[rng.IntN(len(kinds))]
	if d.kind != appendStray {
		d.src, d.n = "", 0
	}
	switch d.kind {
	case cutShort:
		d.pos = rng.IntN(size + 1)
	case flipBits, zeroRange, overwriteRange:
		d.pos = rng.IntN(size)
		// Mostly small ranges, which stay within one batch or field;
		// sometimes up to the end of the file.
		span := []int{1, 4, 16, 64, size - d.pos}[rng.IntN(5)]
		d.n = 1 + rng.IntN(min(span, size-d.pos))
	case appendGarbage:
		d.n = 1 + rng.IntN(200)
	case appendBatch:
		// A whole valid batch whose offsets do not continue the log
		// (unless the file's first batch is damaged too).
		d.n = min(parseHeader(f[name]).Size(), size)
		if d.n < batchHeaderLen {
			d.kind, d.n = appendGarbage, batchHeaderLen
		}
	case appendForged:
		// Well framed and continuing the offsets, so only the CRC (or,
		// below the recovery point, the next segment's base) gives it
		// away. A forged batch with a valid CRC would be
		// indistinguishable from data and is not made.
		var ok bool
		if d.pos, d.n, ok = lastFramedBatch(f[name]); !ok {
			d.kind, d.pos, d.n = appendGarbage, 0, batchHeaderLen
		}
	}
	return d
}
