package broker

// Replay safety of the partition state machine: golden partition Raft
// logs written once by a release (testdata/replay/vN.log) are replayed
// into a fresh replica by the current code, which must answer every entry
// as recorded and end with the same log bytes and derived state
// (vN.results.txt, vN.state.txt). See testdata/replay/README.md.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/raft"
	"github.com/weir-broker/weir/raft/replaytest"
)

const (
	partReplayDir  = "testdata/replay"
	partReplayKind = "partition"
	// newestPartitionReplay is the version -write-golden writes when its
	// log does not exist yet; raise it, with a generator of its own, to
	// record a new golden log. Older versions stay and keep being
	// replayed.
	newestPartitionReplay = 1
	// partReplayNowMs is the replica's clock during replays. Apply reads
	// no clock for what it decides, but the log rolls a segment by age
	// (segment.ms) with it, so a fixed clock keeps the segment layout
	// fixed.
	partReplayNowMs = 1_767_225_600_000
)

// partitionLogSHA256 pins each golden log's bytes. A log, once
// committed, never changes; -write-golden prints the checksum of a new
// one to record here.
var partitionLogSHA256 = map[int]string{
	1: "2c0eb8da83353bf77797182d21d9a385766033f67c00e47ef198388de4d48547",
}

var partitionGenerators = map[int]func(t *testing.T) []replaytest.Entry{
	1: generatePartitionV1,
}

// partReplayConfig is the replica's log configuration: small segments,
// so that the log rolls and DeleteRecords removes whole segments.
func partReplayConfig() log.Config {
	c := log.DefaultConfig()
	c.SegmentBytes = 1024
	c.IndexIntervalBytes = 256
	c.Now = func() time.Time { return time.UnixMilli(partReplayNowMs) }
	c.Logger = slog.New(slog.DiscardHandler)
	return c
}

// openReplayPartition opens a replica in dir as openReplica does, without
// its Raft group.
func openReplayPartition(t *testing.T, dir string) *Partition {
	t.Helper()
	p := newPartition(newTopic(&controller.Topic{Name: "replay"}), 0, dir)
	l, err := log.Open(dir, partReplayConfig())
	if err != nil {
		t.Fatal(err)
	}
	p.log = l
	if err := p.recoverFromCheckpoint(true, slog.New(slog.DiscardHandler)); err != nil {
		l.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return p
}

type partOutput struct {
	text   string // the entry's lines of the results file
	detail string // the error's message (not recorded: wording may change)
}

// replayPartition applies entries to p as the group's state machine
// adapter hands them over: commands to Apply, nothing else.
func replayPartition(t *testing.T, p *Partition, entries []replaytest.Entry) []partOutput {
	t.Helper()
	var outs []partOutput
	for _, e := range entries {
		var b strings.Builder
		var detail string
		fmt.Fprintf(&b, "entry %d term %d %s\n", e.Index, e.Term, describePartitionEntry(e))
		if e.Type != replaytest.TypeCommand {
			b.WriteString("  result not handed to the state machine\n")
		} else {
			res, ok := p.Apply(raft.Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)}).(applyResult)
			if !ok {
				t.Fatalf("entry %d: Apply returned no applyResult", e.Index)
			}
			b.WriteString("  result ")
			if res.err != nil {
				b.WriteString("error " + errorName(res.err))
				detail = res.err.Error()
			} else {
				b.WriteString("ok")
			}
			fmt.Fprintf(&b, " base_offset=%d log_append_time=%d append_log_start=%d log_start=%d\n",
				res.append.BaseOffset, res.append.LogAppendTime, res.append.LogStartOffset, res.logStart)
		}
		fmt.Fprintf(&b, "  state %s\n", partitionStateLine(p))
		outs = append(outs, partOutput{text: b.String(), detail: detail})
	}
	return outs
}

// errorName is the Kafka error an apply error wraps.
func errorName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Sprintf("%s(%d)", ke.Message, ke.Code)
	}
	if errors.Is(err, errReplayed) {
		return "replayed"
	}
	return "not-a-kafka-error"
}

// partitionStateLine summarises the replica after an entry: applied
// index, offsets, epochs, producers and a hash of the log's batches.
func partitionStateLine(p *Partition) string {
	return fmt.Sprintf("applied=%d log_start=%d end=%d hwm=%d segments=%d epochs=%s producers=%s log_sha256=%s",
		p.applied, p.log.LogStartOffset(), p.log.EndOffset(), p.HighWatermark(), p.log.NumSegments(),
		formatEpochs(p), formatProducers(p), logHash(p))
}

func formatEpochs(p *Partition) string {
	p.epochs.mu.Lock()
	defer p.epochs.mu.Unlock()
	parts := make([]string, len(p.epochs.entries))
	for i, e := range p.epochs.entries {
		parts[i] = fmt.Sprintf("%d@%d", e.epoch, e.startOffset)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// formatProducers lists each producer's epoch and remembered batches,
// oldest first: seqs first-last @ base offset.
func formatProducers(p *Partition) string {
	ids := make([]int64, 0, len(p.producers.m))
	for id := range p.producers.m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var parts []string
	for _, id := range ids {
		e := p.producers.m[id]
		var bs []string
		for k := 0; k < e.n; k++ {
			slot := k
			if e.n == producerWindow {
				slot = (e.next + k) % producerWindow
			}
			b := e.batches[slot]
			bs = append(bs, fmt.Sprintf("%d-%d@%d", b.firstSeq, b.lastSeq, b.baseOffset))
		}
		parts = append(parts, fmt.Sprintf("%d:e%d[%s]", id, e.epoch, strings.Join(bs, " ")))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// logHash hashes every batch the log serves, from its start to its end
// (the first 8 bytes, in hex), or says where it cannot be read.
func logHash(p *Partition) string {
	h := sha256.New()
	for off, end := p.log.LogStartOffset(), p.log.EndOffset(); off < end; {
		data, err := p.log.Read(off, 1<<30, log.Obligatory, end)
		if err != nil {
			return fmt.Sprintf("unreadable-at-%d(%v)", off, err)
		}
		next, ok := log.EndOffset(data)
		if !ok || next <= off {
			return fmt.Sprintf("unreadable-at-%d(read ends at %d)", off, next)
		}
		h.Write(data)
		off = next
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// describePartitionEntry renders an entry from its raw bytes.
func describePartitionEntry(e replaytest.Entry) string {
	if e.Type != replaytest.TypeCommand {
		return replaytest.TypeName(e.Type)
	}
	d := e.Data
	if len(d) < entryHeaderLen {
		return fmt.Sprintf("command raw %d bytes %x", len(d), d)
	}
	arg := int64(binary.BigEndian.Uint64(d[2:]))
	switch {
	case d[0] == 1 && d[1] == 1:
		return fmt.Sprintf("command append log_append_time=%d %s", arg, describeBatches(d[entryHeaderLen:]))
	case d[0] == 1 && d[1] == 2:
		return fmt.Sprintf("command delete_records offset=%d extra_bytes=%d", arg, len(d)-entryHeaderLen)
	}
	return fmt.Sprintf("command version=%d kind=%d arg=%d %d bytes", d[0], d[1], arg, len(d))
}

// describeBatches renders record batch headers from their bytes (RecordBatch
// v2 layout), without validating them.
func describeBatches(b []byte) string {
	var parts []string
	for len(b) > 0 {
		if len(b) < 61 {
			parts = append(parts, fmt.Sprintf("trailing %d bytes", len(b)))
			break
		}
		size := int(binary.BigEndian.Uint32(b[8:])) + 12
		attrs := binary.BigEndian.Uint16(b[21:])
		codec := [...]string{"none", "gzip", "snappy", "lz4", "zstd", "codec5", "codec6", "codec7"}[attrs&7]
		parts = append(parts, fmt.Sprintf("batch{bytes=%d codec=%s attrs=%#x records=%d first_ts=%d max_ts=%d pid=%d pepoch=%d seq=%d crc=%08x}",
			size, codec, attrs, int32(binary.BigEndian.Uint32(b[57:])), int64(binary.BigEndian.Uint64(b[27:])),
			int64(binary.BigEndian.Uint64(b[35:])), int64(binary.BigEndian.Uint64(b[43:])), int16(binary.BigEndian.Uint16(b[51:])),
			int32(binary.BigEndian.Uint32(b[53:])), binary.BigEndian.Uint32(b[17:])))
		if size < 61 || size > len(b) {
			parts = append(parts, fmt.Sprintf("(length field says %d bytes, %d left)", size, len(b)))
			break
		}
		b = b[size:]
	}
	if len(parts) == 0 {
		return "no batch"
	}
	return strings.Join(parts, " ")
}

const partResultsHeader = `# Expected results of replaying %s into a fresh partition replica: per
# entry, what Partition.Apply answered and the replica's state after it.
# Written by TestPartitionReplayGolden; never edit it by hand.
# testdata/replay/README.md says when it may be regenerated.
`

const partStateHeader = `# Expected state of a partition replica after replaying %s: the log's
# files and batches and the state derived from them. Written by
# TestPartitionReplayGolden; never edit it by hand.
# testdata/replay/README.md says when it may be regenerated.
`

func partResultsText(logName string, outs []partOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, partResultsHeader, logName)
	for _, o := range outs {
		b.WriteString(o.text)
	}
	return b.String()
}

// partStateText describes the replica in full: configuration, offsets,
// every file of the partition directory (segment files and the small
// state files by content hash, the disposable indexes by size), every
// batch, the producer table, the leader epochs.
func partStateText(t *testing.T, logName string, p *Partition) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, partStateHeader, logName)
	cfg := partReplayConfig()
	fmt.Fprintf(&b, "config segment_bytes=%d segment_ms=%d index_interval_bytes=%d now_ms=%d\n",
		cfg.SegmentBytes, cfg.SegmentMs, cfg.IndexIntervalBytes, partReplayNowMs)
	fmt.Fprintf(&b, "applied_index %d\nlog_start_offset %d\nlog_end_offset %d\nhigh_watermark %d\nsegments %d\n",
		p.applied, p.log.LogStartOffset(), p.log.EndOffset(), p.HighWatermark(), p.log.NumSegments())
	if err := p.log.Sync(); err != nil {
		t.Fatal(err)
	}
	b.WriteString("files\n")
	des, err := os.ReadDir(p.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		info, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		name := de.Name()
		if strings.HasSuffix(name, ".index") || strings.HasSuffix(name, ".timeindex") || !info.Mode().IsRegular() {
			continue // derived from the segment and rebuilt at will
		}
		data, err := os.ReadFile(filepath.Join(p.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "  %s %d bytes sha256 %s\n", name, len(data), hex.EncodeToString(sum[:]))
	}
	b.WriteString("batches\n")
	err = p.log.Batches(p.log.LogStartOffset(), func(h log.BatchHeader) bool {
		ts := "create"
		if h.IsLogAppendTime() {
			ts = "log_append"
		}
		fmt.Fprintf(&b, "  offsets %d-%d leader_epoch %d codec %d timestamp %s first_ts %d max_ts %d producer %d/%d seq %d records %d bytes %d crc %08x\n",
			h.BaseOffset, h.LastOffset(), h.PartitionLeaderEpoch, h.Compression(), ts, h.FirstTimestamp, h.MaxTimestamp,
			h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.NumRecords, h.Size(), h.CRC)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "producers %s\n", formatProducers(p))
	fmt.Fprintf(&b, "leader_epochs %s\n", formatEpochs(p))
	b.WriteString("end_offset_for_epoch")
	for ep := int32(-1); ep <= 5; ep++ {
		e, o := p.EndOffsetForEpoch(ep)
		fmt.Fprintf(&b, " %d:(%d,%d)", ep, e, o)
	}
	b.WriteString("\n")
	return b.String()
}

func TestPartitionReplayGolden(t *testing.T) {
	if *replaytest.WriteGolden {
		writePartitionGolden(t, newestPartitionReplay)
	}
	versions, err := replaytest.Versions(partReplayDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { checkPartitionGolden(t, v) })
	}
}

func partGoldenPaths(v int) (logPath, resultsPath, statePath string) {
	return replaytest.Paths(partReplayDir, v, ".state.txt")
}

func writePartitionGolden(t *testing.T, v int) {
	logPath, resultsPath, statePath := partGoldenPaths(v)
	if _, err := os.Stat(logPath); err == nil {
		t.Logf("-write-golden: %s exists and is never rewritten; raise newestPartitionReplay (with a generator) to write a new version", logPath)
		return
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	gen := partitionGenerators[v]
	if gen == nil {
		t.Fatalf("-write-golden: no generator for version %d", v)
	}
	entries := gen(t)
	data, err := replaytest.Encode(partReplayKind, entries)
	if err != nil {
		t.Fatal(err)
	}
	p := openReplayPartition(t, t.TempDir())
	outs := replayPartition(t, p, entries)
	for _, f := range []struct {
		path string
		data []byte
	}{
		{logPath, data},
		{resultsPath, []byte(partResultsText(filepath.Base(logPath), outs))},
		{statePath, []byte(partStateText(t, filepath.Base(logPath), p))},
	} {
		if err := replaytest.CreateNew(f.path, f.data); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(data)
	t.Logf("-write-golden: wrote %s (%d entries) and its expectations; pin its SHA-256 %x in the test", logPath, len(entries), sum)
}

func checkPartitionGolden(t *testing.T, v int) {
	logPath, resultsPath, statePath := partGoldenPaths(v)
	entries, err := replaytest.ReadPinned(logPath, partReplayKind, partitionLogSHA256[v])
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatalf("%s holds no entries", logPath)
	}
	p := openReplayPartition(t, t.TempDir())
	outs := replayPartition(t, p, entries)
	gotResults := partResultsText(filepath.Base(logPath), outs)
	gotState := partStateText(t, filepath.Base(logPath), p)
	if *replaytest.UpdateExpectations {
		if err := os.WriteFile(resultsPath, []byte(gotResults), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(statePath, []byte(gotState), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("-update-replay-expectations: rewrote %s and %s", resultsPath, statePath)
	}
	wantResults, err := os.ReadFile(resultsPath)
	if err != nil {
		t.Fatalf("%v (expectations are written with the log by -write-golden)", err)
	}
	wantState, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	if line, w, g, entry, ok := replaytest.FirstDiff(string(wantResults), gotResults, "entry "); !ok {
		var detail string
		for _, o := range outs {
			if strings.HasPrefix(o.text, entry+"\n") && o.detail != "" {
				detail = "\nthe entry's error now: " + o.detail
			}
		}
		t.Fatalf("replaying %s diverges from %s at line %d, first diverging entry:\n  %s\nwant: %q\ngot:  %q%s\n\n%s",
			logPath, resultsPath, line, clip(entry, 300), w, g, detail, partDivergenceAdvice)
	}
	if line, w, g, _, ok := replaytest.FirstDiff(string(wantState), gotState, ""); !ok {
		t.Fatalf("replaying %s ends in a state that differs from %s at line %d:\nwant: %q\ngot:  %q\n\n%s",
			logPath, statePath, line, w, g, partDivergenceAdvice)
	}

	// A replica that restarts after any entry (a clean stop: the log
	// checkpointed and closed, then reopened and recovered) and is handed
	// the whole log again skips what it holds and applies the rest as the
	// replica that did not restart, producer table included (the
	// checkpoint carries it: rebuilt from the batches left in the log it
	// would forget producers whose batches DeleteRecords removed). Not
	// compared: the segment count (a restart drops segments wholly below
	// the log start; segment files are each replica's own).
	for k := 1; k < len(entries); k++ {
		dir := t.TempDir()
		q := openReplayPartition(t, dir)
		replayPartition(t, q, entries[:k])
		q.appendMu.Lock()
		err := q.checkpointLocked()
		q.appendMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if err := q.log.Close(); err != nil {
			t.Fatal(err)
		}
		q = openReplayPartition(t, dir)
		again := replayPartition(t, q, entries)
		for i := k; i < len(entries); i++ {
			if w, g := withoutLocal(outs[i].text), withoutLocal(again[i].text); w != g {
				t.Fatalf("a replica restarted after entry %d applies entry %d differently:\nwant:\n%s\ngot:\n%s",
					entries[k-1].Index, entries[i].Index, w, g)
			}
		}
	}
}

var localFields = regexp.MustCompile(` segments=[0-9]+`)

func withoutLocal(s string) string { return localFields.ReplaceAllString(s, "") }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

const partDivergenceAdvice = `The current code applies a partition entry that an earlier release
committed differently: replicas of different releases, or a replica
replaying its Raft log after an upgrade, would hold different batches,
offsets or producer state. Gate the change behind a cluster feature
(metadata) version so that entries written before it apply as they did, or
revert it. Regenerate the expectations (-update-replay-expectations) only
as testdata/replay/README.md describes.`
