// Package replaytest reads and writes the golden Raft logs of weir's replay
// tests (broker/controller/testdata/replay, broker/testdata/replay): logs
// of committed entries, written once by a release and replayed by every
// later one, which must apply them to the same results and the same
// state. It is imported by tests only.
//
// # File format
//
// All integers are big-endian.
//
//	offset  size  field
//	0       8     magic "WEIRRLOG"
//	8       2     format version, uint16 (1)
//	10      1     length k of the kind
//	11      k     kind, ASCII: "controller" or "partition" (which state
//	              machine the entries are for)
//	11+k    ...   frames, one per log entry, until the end of the file
//
// A frame:
//
//	offset  size  field
//	0       8     Raft index, uint64 (strictly increasing along the file)
//	8       8     Raft term, uint64 (never decreasing)
//	16      1     entry type: hashicorp/raft's LogType (0 command, 1 no-op,
//	              4 barrier, 5 configuration)
//	17      4     length n of the data, uint32
//	21      n     data: the entry's bytes exactly as the Raft log holds
//	              them (raft.Log.Data)
//	21+n    4     CRC-32C (Castagnoli) of bytes 0 to 21+n of the frame
//
// Indexes may skip (entries of no interest were left out), terms rise at
// leader changes. Nothing follows the last frame.
package replaytest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Magic opens every golden log; FormatVersion is the framing's version.
const (
	Magic         = "WEIRRLOG"
	FormatVersion = 1
)

// Entry types, hashicorp/raft's LogType values.
const (
	TypeCommand       uint8 = 0
	TypeNoop          uint8 = 1
	TypeBarrier       uint8 = 4
	TypeConfiguration uint8 = 5
)

// TypeName names an entry type.
func TypeName(t uint8) string {
	switch t {
	case TypeCommand:
		return "command"
	case TypeNoop:
		return "noop"
	case TypeBarrier:
		return "barrier"
	case TypeConfiguration:
		return "configuration"
	}
	return fmt.Sprintf("type-%d", t)
}

// Entry is one Raft log entry.
type Entry struct {
	Index uint64
	Term  uint64
	Type  uint8
	Data  []byte
}

// Flags of the replay tests. Neither is ever needed to run them.
var (
	// WriteGolden writes the newest version's golden log, and its
	// expectations, when no file of that version exists yet. It never
	// overwrites a log.
	WriteGolden = flag.Bool("write-golden", false,
		"replay tests: write the newest golden log version and its expectations if that version does not exist yet (never overwrites a log)")
	// UpdateExpectations rewrites the expectations of every existing
	// golden log from a replay with the current code. The logs stay as
	// they are. See the README.md next to the logs for when this is
	// allowed.
	UpdateExpectations = flag.Bool("update-replay-expectations", false,
		"replay tests: rewrite the expected results of the existing golden logs (the logs are never rewritten; see testdata/replay/README.md)")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the file form of entries.
func Encode(kind string, entries []Entry) ([]byte, error) {
	if kind == "" || len(kind) > 255 {
		return nil, fmt.Errorf("replaytest: kind %q", kind)
	}
	out := []byte(Magic)
	out = binary.BigEndian.AppendUint16(out, FormatVersion)
	out = append(out, byte(len(kind)))
	out = append(out, kind...)
	for i, e := range entries {
		if i > 0 && (e.Index <= entries[i-1].Index || e.Term < entries[i-1].Term) {
			return nil, fmt.Errorf("replaytest: entry %d (index %d term %d) does not follow index %d term %d",
				i, e.Index, e.Term, entries[i-1].Index, entries[i-1].Term)
		}
		if e.Index == 0 || e.Term == 0 {
			return nil, fmt.Errorf("replaytest: entry %d: index %d term %d", i, e.Index, e.Term)
		}
		start := len(out)
		out = binary.BigEndian.AppendUint64(out, e.Index)
		out = binary.BigEndian.AppendUint64(out, e.Term)
		out = append(out, e.Type)
		out = binary.BigEndian.AppendUint32(out, uint32(len(e.Data)))
		out = append(out, e.Data...)
		out = binary.BigEndian.AppendUint32(out, crc32.Checksum(out[start:], castagnoli))
	}
	return out, nil
}

// Decode reads a file of the given kind.
func Decode(kind string, b []byte) ([]Entry, error) {
	hdr := len(Magic) + 3
	if len(b) < hdr || string(b[:len(Magic)]) != Magic {
		return nil, errors.New("replaytest: not a golden Raft log (bad magic)")
	}
	if v := binary.BigEndian.Uint16(b[len(Magic):]); v != FormatVersion {
		return nil, fmt.Errorf("replaytest: format version %d, this code reads %d", v, FormatVersion)
	}
	k := int(b[hdr-1])
	if len(b) < hdr+k {
		return nil, errors.New("replaytest: truncated header")
	}
	if got := string(b[hdr : hdr+k]); got != kind {
		return nil, fmt.Errorf("replaytest: a %q log, want %q", got, kind)
	}
	var entries []Entry
	for rest, off := b[hdr+k:], hdr+k; len(rest) > 0; {
		if len(rest) < 21 {
			return nil, fmt.Errorf("replaytest: truncated frame at byte %d", off)
		}
		n := int(binary.BigEndian.Uint32(rest[17:]))
		if len(rest) < 21+n+4 {
			return nil, fmt.Errorf("replaytest: truncated frame at byte %d (%d bytes of data)", off, n)
		}
		if got, want := crc32.Checksum(rest[:21+n], castagnoli), binary.BigEndian.Uint32(rest[21+n:]); got != want {
			return nil, fmt.Errorf("replaytest: frame at byte %d: CRC %08x, stored %08x", off, got, want)
		}
		e := Entry{
			Index: binary.BigEndian.Uint64(rest),
			Term:  binary.BigEndian.Uint64(rest[8:]),
			Type:  rest[16],
			Data:  bytes.Clone(rest[21 : 21+n]),
		}
		if e.Data == nil {
			e.Data = []byte{}
		}
		if p := len(entries); p > 0 && (e.Index <= entries[p-1].Index || e.Term < entries[p-1].Term) {
			return nil, fmt.Errorf("replaytest: frame at byte %d: index %d term %d after index %d term %d",
				off, e.Index, e.Term, entries[p-1].Index, entries[p-1].Term)
		}
		entries = append(entries, e)
		rest, off = rest[21+n+4:], off+21+n+4
	}
	return entries, nil
}

// ReadPinned reads a golden log whose SHA-256 must be sum (hex). A log,
// once written, never changes: the checksum, kept in the test's source,
// makes any change to the file an edit of the test as well.
func ReadPinned(path, kind, sum string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	got := sha256.Sum256(b)
	switch hexSum := hex.EncodeToString(got[:]); {
	case sum == "":
		return nil, fmt.Errorf("%s is not pinned: record its SHA-256 %s in the test, next to the other versions'", path, hexSum)
	case hexSum != sum:
		return nil, fmt.Errorf("%s has SHA-256 %s, pinned %s: golden logs are never rewritten; restore the file (git checkout) and record changes in a new version", path, hexSum, sum)
	}
	entries, err := Decode(kind, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}

// CreateNew writes data to a file that must not exist yet: golden logs,
// once written, are never rewritten.
func CreateNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: golden files are never overwritten", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// FirstDiff compares two line-oriented texts. It returns ok when they are
// equal, and otherwise the 1-based number of the first line that differs
// with that line of each ("" past the end), and the last line at or
// before it, in want, that starts with header (the entry it belongs to).
func FirstDiff(want, got, header string) (line int, wantLine, gotLine, entry string, ok bool) {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) && strings.HasPrefix(wl, header) {
			entry = wl
		}
		if wl != gl || (i < len(w)) != (i < len(g)) {
			return i + 1, wl, gl, entry, false
		}
	}
	return 0, "", "", "", true
}

var versionFile = regexp.MustCompile(`^v([0-9]+)\.log$`)

// Versions lists the golden log versions in dir (files vN.log), in order.
// Every golden directory starts at version 1: a directory whose first
// is missing, or that has none, is an error.
func Versions(dir string) ([]int, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var vs []int
	for _, de := range des {
		if m := versionFile.FindStringSubmatch(de.Name()); m != nil {
			v, _ := strconv.Atoi(m[1])
			vs = append(vs, v)
		}
	}
	sort.Ints(vs)
	if len(vs) == 0 || vs[0] != 1 {
		return nil, fmt.Errorf("%s: want golden logs v1.log and later, found versions %v", dir, vs)
	}
	return vs, nil
}

// Paths are version v's files in dir: the log, the expected results and
// the expected final state (its file name ends in stateSuffix).
func Paths(dir string, v int, stateSuffix string) (logPath, resultsPath, statePath string) {
	base := filepath.Join(dir, fmt.Sprintf("v%d", v))
	return base + ".log", base + ".results.txt", base + stateSuffix
}
