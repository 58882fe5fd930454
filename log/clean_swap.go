package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The swap of cleaned segments is one commit, the clean-swap file:
//
//  1. The new segments are written under <name>.cleaned (log and both
//     indexes), fsynced, and the directory fsynced. A crash now leaves
//     only .cleaned files, which Open removes: the old log.
//  2. clean-swap is written atomically (commit point). It names the old
//     and the new base offsets and the new cleaner checkpoint.
//  3. The old segments are renamed to .deleted (readers keep reading
//     them), the .cleaned files renamed into place, the directory
//     fsynced; the in-memory segment list is switched.
//  4. cleaner-checkpoint is written, then clean-swap removed durably.
//
// Open finding clean-swap redoes steps 3 and 4 (renaming whatever .cleaned
// files are left, removing old segments that are not also new ones), so
// after a crash the log is the old one or the new one, never a mix.

// swapCleaned replaces the leading segments old (as pinned: gens and
// sizes) by neu and advances the cleaner checkpoint to cleanedTo, in the
// order described at the top of this file. committed reports whether the
// commit record may be on disk: before it, nothing changed (the error is
// ErrCleanAborted or the log's state); from it on, errors are sticky.
func (l *Log) swapCleaned(old []*segment, gens []uint64, sizes []int64, neu []*segment, cleanedTo int64) (committed bool, err error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if _, err := l.writable(); err != nil {
		return false, err
	}
	// The writer is the only mutator, so reading segs without mu is safe.
	if len(l.segs) <= len(old) {
		return false, ErrCleanAborted
	}
	for i, s := range old {
		if l.segs[i] != s || s.gen.Load() != gens[i] || s.size != sizes[i] {
			return false, ErrCleanAborted
		}
	}
	oldBases := make([]int64, len(old))
	for i, s := range old {
		oldBases[i] = s.base
	}
	newBases := make([]int64, len(neu))
	for i, s := range neu {
		newBases[i] = s.base
	}
	if err := writeSwapMarker(l.fsys, l.dir, cleanedTo, oldBases, newBases); err != nil {
		// The rename may have become durable even if the fsync failed.
		return true, l.fail(fmt.Errorf("write %s: %w", cleanSwapFile, err))
	}
	for _, s := range old {
		if err := s.trash(); err != nil {
			return true, l.fail(fmt.Errorf("clean: remove segment %d: %w", s.base, err))
		}
	}
	for _, s := range neu {
		for _, ext := range []string{extLog, extIndex, extTimeIndex} {
			name := segmentName(l.dir, s.base, ext)
			if err := l.fsys.Rename(name+cleanedSuffix, name); err != nil {
				return true, l.fail(fmt.Errorf("clean: install segment %d: %w", s.base, err))
			}
		}
	}
	if err := syncDir(l.fsys, l.dir); err != nil {
		return true, l.fail(fmt.Errorf("clean: fsync %s: %w", l.dir, err))
	}
	l.mu.Lock()
	rest := l.segs[len(old):]
	l.segs = append(slices.Clone(neu), rest...)
	for _, s := range old {
		l.size -= s.size
	}
	for _, s := range neu {
		l.size += s.size
	}
	l.cleanedTo = cleanedTo
	l.mu.Unlock()
	for _, s := range old {
		s.deleted.Store(true)
		s.release()
	}
	if err := writeCheckpoint(l.fsys, l.dir, cleanerCheckpointFile, cleanedTo); err != nil {
		return true, l.fail(fmt.Errorf("write %s: %w", cleanerCheckpointFile, err))
	}
	if err := removeFileDurably(l.fsys, l.dir, cleanSwapFile); err != nil {
		return true, l.fail(fmt.Errorf("remove %s: %w", cleanSwapFile, err))
	}
	return true, nil
}

// lowerCleanedTo moves the cleaner checkpoint down to offset before
// TruncateTo or Reset commits a log that ends (or starts) there: the
// holes Open accepts below the checkpoint must not include offsets the
// log will write again. Caller holds appendMu.
func (l *Log) lowerCleanedTo(offset int64) error {
	if offset >= l.cleanedTo {
		return nil
	}
	return l.setCleanedTo(offset)
}

// setCleanedTo makes offset the cleaner checkpoint, on disk first.
func (l *Log) setCleanedTo(offset int64) error {
	if err := writeCheckpoint(l.fsys, l.dir, cleanerCheckpointFile, offset); err != nil {
		return fmt.Errorf("log: write %s: %w", cleanerCheckpointFile, err)
	}
	l.mu.Lock()
	l.cleanedTo = offset
	l.mu.Unlock()
	return nil
}

// The clean-swap file, written atomically like the checkpoints:
//
//	line 1: format version, "0"
//	line 2: cleaner checkpoint after the swap, decimal
//	line 3: base offsets of the replaced segments, space separated
//	line 4: base offsets of the new segments, space separated
//
// The final newline is required.
func writeSwapMarker(fsys FS, dir string, cleanedTo int64, oldBases, newBases []int64) error {
	var b strings.Builder
	b.WriteString(checkpointVersion + "\n" + strconv.FormatInt(cleanedTo, 10) + "\n")
	for _, bases := range [][]int64{oldBases, newBases} {
		for i, base := range bases {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.FormatInt(base, 10))
		}
		b.WriteByte('\n')
	}
	return WriteFileAtomic(fsys, filepath.Join(dir, cleanSwapFile), []byte(b.String()))
}

func parseSwapMarker(b []byte) (cleanedTo int64, oldBases, newBases []int64, ok bool) {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return 0, nil, nil, false
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	if len(lines) != 4 || lines[0] != checkpointVersion {
		return 0, nil, nil, false
	}
	cleanedTo, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || cleanedTo < 0 {
		return 0, nil, nil, false
	}
	parse := func(s string) ([]int64, bool) {
		var out []int64
		for _, f := range strings.Fields(s) {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil || v < 0 {
				return nil, false
			}
			out = append(out, v)
		}
		return out, len(out) > 0
	}
	var ok1, ok2 bool
	oldBases, ok1 = parse(lines[2])
	newBases, ok2 = parse(lines[3])
	return cleanedTo, oldBases, newBases, ok1 && ok2
}

// finishCleanSwap redoes steps 3 and 4 of a committed swap found at Open.
// Like a pending reset, an unreadable clean-swap fails Open: ignoring it
// could mix old and new segments.
func finishCleanSwap(fsys FS, dir string) (bool, error) {
	b, err := readFile(fsys, filepath.Join(dir, cleanSwapFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", cleanSwapFile, err)
	}
	cleanedTo, oldBases, newBases, ok := parseSwapMarker(b)
	if !ok {
		return false, fmt.Errorf("unreadable %s: %q", cleanSwapFile, b)
	}
	for _, base := range oldBases {
		if !slices.Contains(newBases, base) {
			if err := newSegment(fsys, dir, base).removeFiles(); err != nil {
				return false, err
			}
		}
	}
	for _, base := range newBases {
		for _, ext := range []string{extLog, extIndex, extTimeIndex} {
			name := segmentName(dir, base, ext)
			if err := fsys.Rename(name+cleanedSuffix, name); err != nil && !errors.Is(err, os.ErrNotExist) {
				return false, err
			}
		}
	}
	if err := syncDir(fsys, dir); err != nil {
		return false, err
	}
	if err := writeCheckpoint(fsys, dir, cleanerCheckpointFile, cleanedTo); err != nil {
		return false, err
	}
	return true, removeFileDurably(fsys, dir, cleanSwapFile)
}
