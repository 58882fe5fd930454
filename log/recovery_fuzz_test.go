package log

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"
)

// fuzzTemplate builds the log FuzzRecovery damages: multiSpecs' first
// ten batches over four segments with dense indexes, closed, on memFS.
func fuzzTemplate(tb testing.TB) dirFiles {
	tb.Helper()
	cfg := corruptionConfig()
	cfg.FS = newMemFS()
	l, err := Open(crashDir, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	appendSpecs(tb, l, multiSpecs[:10])
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	files := memDirFiles(cfg.FS.(*memFS))
	if n := len(files.segmentBases()); n < 4 {
		tb.Fatalf("template has %d segments, want 4", n)
	}
	return files
}

// memFSWith returns a memFS whose crashDir holds files, all durable.
func memFSWith(files dirFiles) *memFS {
	m := newMemFS()
	m.MkdirAll(crashDir, 0o755)
	for name, data := range files {
		ino := &memInode{data: slices.Clone(data), synced: slices.Clone(data)}
		m.names[filepath.Join(crashDir, name)] = ino
		m.durable[filepath.Join(crashDir, name)] = ino
	}
	return m
}

// fuzzDamage applies FuzzRecovery's input to the template's files. target
// picks a segment file (.log, .index or .timeindex of one of the
// segments); how&3 says what data does to it: 0 replaces it, 1 is
// appended, 2 overwrites it from position at (extending it if needed), 3
// is appended after cutting it at at. how&4 also removes the recovery
// point, so that Open validates every segment.
func fuzzDamage(files dirFiles, target, how uint8, at uint16, data []byte) string {
	names := files.segmentFiles()
	name := names[int(target)%len(names)]
	old := files[name]
	pos := int(at) % (len(old) + 1)
	var b []byte
	switch how & 3 {
	case 0:
		b = slices.Clone(data)
	case 1:
		b = append(slices.Clone(old), data...)
	case 2:
		b = slices.Clone(old)
		if need := pos + len(data); need > len(b) {
			b = append(b, make([]byte, need-len(b))...)
		}
		copy(b[pos:], data)
	case 3:
		b = append(slices.Clone(old[:pos]), data...)
	}
	files[name] = b
	if how&4 != 0 {
		delete(files, recoveryPointFile)
	}
	return name
}

// FuzzRecovery replaces, extends or overwrites one segment, offset index
// or time index file of a small valid log with the fuzzer's bytes and
// opens it. Open must not fail, panic or hang, and the log must keep every
// batch before the first one the input changed. Where Open validates the
// damaged file (any index file; the .log of a segment at or above the
// recovery point, or of any segment without one) it must serve only
// whole, valid batches with contiguous offsets (openRecovered), lose
// nothing to index damage alone, accept an append and reopen to the same
// state. A .log below the recovery point is trusted, as in Kafka (see
// TestDamageBelowRecoveryPointIsNotScanned): there the batches before the
// damage must still read back exactly, and the log must still take an
// append and keep it across a reopen.
func FuzzRecovery(f *testing.F) {
	template := fuzzTemplate(f)
	batches := storedBatches(f, template)
	names := template.segmentFiles()
	for i, name := range names {
		b := template[name]
		f.Add(uint8(i), uint8(0), uint16(0), b)                         // the file as it is
		f.Add(uint8(i), uint8(3), uint16(len(b)/2), []byte{})           // cut in half
		f.Add(uint8(i), uint8(4|1), uint16(0), b[:min(len(b), 70)])     // its own start appended
		f.Add(uint8(i), uint8(2), uint16(len(b)/3), []byte{0xff, 0, 1}) // overwritten
		if i >= 3 && i < 6 {
			// The next segment's valid file in place of the second
			// segment's own (an index then passed every check).
			f.Add(uint8(i), uint8(0), uint16(0), template[names[i+3]])
		}
	}
	cfg := corruptionConfig()
	f.Fuzz(func(t *testing.T, target, how uint8, at uint16, data []byte) {
		files := template.clone()
		name := fuzzDamage(files, target, how, at, data)
		keep, raw := survivors(batches, files)
		cfg := cfg
		cfg.FS = memFSWith(files)
		what := "fuzzed " + name
		if filepath.Ext(name) != extLog || files.scannedSegments()[name] {
			l, st := openRecovered(t, crashDir, cfg, what)
			if !bytes.HasPrefix(st.raw, raw) {
				l.Close()
				t.Fatalf("%s: recovered %v, want at least the %d batches before the damage", what, st, keep)
			}
			if filepath.Ext(name) != extLog && !st.equal(logState{end: endOf(batches, len(batches)), raw: raw}) {
				l.Close()
				t.Fatalf("%s: recovered %v after index damage alone, want all %d batches", what, st, len(batches))
			}
			appendAndReopen(t, l, st, crashDir, cfg, what)
			return
		}
		checkTrustedDamage(t, cfg, raw, what)
	})
}

// checkTrustedDamage opens a log whose damage lies in a segment Open does
// not validate: the batches before the damage (intact, as survivors gives
// them) must read back exactly, every offset must read (or fail) without a
// panic, and an append must survive a reopen.
func checkTrustedDamage(t *testing.T, cfg Config, intact []byte, what string) {
	t.Helper()
	l, err := Open(crashDir, cfg)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	end := l.EndOffset()
	for _, b := range batchesOf(t, intact) {
		base := parseHeader(b).BaseOffset
		got, err := l.Read(base, 1, Obligatory, end)
		if err != nil || !bytes.Equal(got, b) {
			l.Close()
			t.Fatalf("%s: Read(%d) = %d bytes, %v; want the intact %d-byte batch", what, base, len(got), err, len(b))
		}
	}
	for off := l.LogStartOffset(); off < end && off < 1<<16; off++ {
		l.Read(off, 1<<20, Obligatory, end)
	}
	b := simpleBatch(t, 2, 3000, 20)
	if res, err := l.Append(b, AppendOptions{}); err != nil || res.BaseOffset != end {
		l.Close()
		t.Fatalf("%s: append: %+v, %v; want base %d", what, res, err, end)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("%s: Close: %v", what, err)
	}
	l, err = Open(crashDir, cfg)
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer l.Close()
	if got, err := l.Read(end, 1, Obligatory, end+2); l.EndOffset() != end+2 || err != nil || !bytes.Equal(got, b) {
		t.Fatalf("%s: reopened with end %d, Read(%d) = %d bytes, %v; want the appended batch", what, l.EndOffset(), end, len(got), err)
	}
}
