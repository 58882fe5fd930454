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
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	p := newPartition(&Topic{Name: "replay"}, 0, dir)
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

// partGen writes a partition log the way leaders would, applying each
// entry to a replica of its own to check the generator's intent.
type partGen struct {
	t       *testing.T
	entries []replaytest.Entry
	index   uint64
	term    uint64
	p       *Partition
}

func (g *partGen) add(typ uint8, data []byte) applyResult {
	g.index++
	g.entries = append(g.entries, replaytest.Entry{Index: g.index, Term: g.term, Type: typ, Data: data})
	if typ != replaytest.TypeCommand {
		return applyResult{}
	}
	return g.p.Apply(raft.Entry{Index: g.index, Term: g.term, Data: bytes.Clone(data)}).(applyResult)
}

// elect starts a term: the new leader's no-op.
func (g *partGen) elect() {
	g.term++
	g.add(replaytest.TypeNoop, nil)
}

func (g *partGen) ok(data []byte) applyResult {
	g.t.Helper()
	r := g.add(replaytest.TypeCommand, data)
	if r.err != nil {
		g.t.Fatalf("generator: entry %d refused: %v", g.index, r.err)
	}
	return r
}

func (g *partGen) fail(data []byte, code *kerr.Error) {
	g.t.Helper()
	if r := g.add(replaytest.TypeCommand, data); !errors.Is(r.err, code) {
		g.t.Fatalf("generator: entry %d answered %v, want %s", g.index, r.err, code.Message)
	}
}

// genRecord is one record of a generated batch.
type genRecord struct {
	key, value []byte
	tsDelta    int64
	headers    [][2]string
}

// genBatch builds a record batch as a producer sends it, compressed with
// codec.
func genBatch(t *testing.T, codec int8, firstTs int64, pid int64, pepoch int16, seq int32, recs []genRecord) []byte {
	var body []byte
	maxTs := firstTs
	for i, r := range recs {
		maxTs = max(maxTs, firstTs+r.tsDelta)
		rec := []byte{0}
		rec = binary.AppendVarint(rec, r.tsDelta)
		rec = binary.AppendVarint(rec, int64(i))
		if r.key == nil {
			rec = binary.AppendVarint(rec, -1)
		} else {
			rec = binary.AppendVarint(rec, int64(len(r.key)))
			rec = append(rec, r.key...)
		}
		rec = binary.AppendVarint(rec, int64(len(r.value)))
		rec = append(rec, r.value...)
		rec = binary.AppendVarint(rec, int64(len(r.headers)))
		for _, h := range r.headers {
			rec = binary.AppendVarint(rec, int64(len(h[0])))
			rec = append(rec, h[0]...)
			rec = binary.AppendVarint(rec, int64(len(h[1])))
			rec = append(rec, h[1]...)
		}
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	body = genCompress(t, codec, body)
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec), LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: firstTs, MaxTimestamp: maxTs, ProducerID: pid, ProducerEpoch: pepoch, FirstSequence: seq,
		NumRecords: int32(len(recs)), Records: body,
	}
	raw := rb.AppendTo(nil)
	rb.Length = int32(len(raw) - 12)
	raw = rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

func genCompress(t *testing.T, codec int8, body []byte) []byte {
	var buf bytes.Buffer
	switch codec {
	case log.CompressionNone:
		return body
	case log.CompressionGzip:
		w := gzip.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case log.CompressionSnappy: // xerial framing, as the Java client writes it
		buf.Write([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1})
		blk := snappy.Encode(nil, body)
		buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(blk))))
		buf.Write(blk)
	case log.CompressionLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case log.CompressionZstd:
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(body, nil)
	default:
		t.Fatalf("codec %d", codec)
	}
	return buf.Bytes()
}

// genValues makes n records with keys key-<i> and values of the given size.
func genValues(n int, prefix string, size int) []genRecord {
	recs := make([]genRecord, n)
	for i := range recs {
		unit := fmt.Sprintf("%s-%d|", prefix, i)
		v := bytes.Repeat([]byte(unit), size/len(unit)+1)[:size]
		recs[i] = genRecord{key: []byte(fmt.Sprintf("key-%d", i)), value: v, tsDelta: int64(i * 3)}
	}
	return recs
}

// generatePartitionV1 is the log of v1.log: three leaders' terms of
// appends (plain and idempotent, every codec, CreateTime and
// LogAppendTime, retries, refused sequences and epochs), DeleteRecords
// and malformed entries.
func generatePartitionV1(t *testing.T) []replaytest.Entry {
	g := &partGen{t: t, term: 1, p: openReplayPartition(t, t.TempDir())}
	ts := int64(partReplayNowMs - 60_000)
	const none, gz, sn, l4, zs = log.CompressionNone, log.CompressionGzip, log.CompressionSnappy, log.CompressionLZ4, log.CompressionZstd
	batch := func(codec int8, pid int64, pepoch int16, seq int32, recs []genRecord) []byte {
		ts += 250
		return genBatch(t, codec, ts, pid, pepoch, seq, recs)
	}
	const pidA, pidB, pidC = 1000, 2000, 3000

	// The group's first configuration and the first leader's no-op.
	g.add(replaytest.TypeConfiguration, nil) // its data left out: the state machine never sees it
	g.add(replaytest.TypeNoop, nil)

	// Term 1: plain and idempotent appends.
	g.ok(encodeAppend(0, batch(none, -1, -1, -1, genValues(3, "plain", 40))))
	a0 := batch(none, pidA, 0, 0, genValues(5, "a", 30))
	first := g.ok(encodeAppend(0, a0)).append.BaseOffset
	a1 := batch(none, pidA, 0, 5, genValues(3, "a", 30))
	second := g.ok(encodeAppend(0, a1)).append.BaseOffset
	// Retries of both: answered with the original offsets, not appended.
	if r := g.ok(encodeAppend(0, a1)); r.append.BaseOffset != second {
		t.Fatalf("generator: retry at %d, want %d", r.append.BaseOffset, second)
	}
	if r := g.ok(encodeAppend(0, a0)); r.append.BaseOffset != first {
		t.Fatalf("generator: retry at %d, want %d", r.append.BaseOffset, first)
	}
	// A gap in the sequence.
	g.fail(encodeAppend(0, batch(none, pidA, 0, 10, genValues(2, "a", 30))), kerr.OutOfOrderSequenceNumber)
	g.ok(encodeAppend(0, batch(gz, pidA, 0, 8, genValues(4, "a-gzip", 60))))
	// LogAppendTime, chosen by the proposer.
	g.ok(encodeAppend(partReplayNowMs-30_000, batch(none, -1, -1, -1, genValues(2, "lat", 20))))
	// A group coordinator's write (offset commits).
	g.ok(encodeAppend(0, log.BuildBatch(ts, []log.KeyValue{
		{Key: []byte("\x00\x01group\x00orders\x00\x00\x00\x00"), Value: []byte("\x00\x03offset-42")},
		{Key: []byte("\x00\x01group\x00orders\x00\x00\x00\x01"), Value: []byte("\x00\x03offset-17")},
	})))
	// Malformed entries.
	g.fail([]byte{2, 1, 0, 0, 0, 0, 0, 0, 0, 0}, kerr.CorruptMessage) // entry version 2
	g.fail([]byte{1, 1, 0}, kerr.CorruptMessage)                      // shorter than the header
	g.fail([]byte{1, 7, 0, 0, 0, 0, 0, 0, 0, 0}, kerr.CorruptMessage) // unknown kind
	g.fail(encodeAppend(0, nil), kerr.CorruptMessage)                 // no batch
	corrupt := batch(none, -1, -1, -1, genValues(2, "corrupt", 20))
	corrupt[len(corrupt)-1] ^= 0xff
	g.fail(encodeAppend(0, corrupt), kerr.CorruptMessage) // CRC mismatch
	g.fail(encodeAppend(0, append(batch(none, -1, -1, -1, genValues(1, "x", 10)), batch(none, -1, -1, -1, genValues(1, "y", 10))...)),
		kerr.CorruptMessage) // two batches in one entry
	g.fail(encodeAppend(0, batch(none, -1, -1, -1, genValues(2, "cut", 20))[:70]), kerr.CorruptMessage) // cut short

	// Term 2: a new leader; the producer bumps its epoch.
	g.elect()
	g.ok(encodeAppend(0, batch(none, pidA, 1, 0, genValues(2, "a-e1", 30))))
	g.fail(encodeAppend(0, batch(none, pidA, 0, 12, genValues(1, "a-old", 30))), kerr.InvalidProducerEpoch)
	g.fail(encodeAppend(0, batch(none, pidA, 2, 3, genValues(1, "a-e2", 30))), kerr.OutOfOrderSequenceNumber)
	// A producer this partition has not seen starts anywhere.
	g.ok(encodeAppend(0, batch(none, pidB, 0, 42, genValues(3, "b", 25))))
	g.ok(encodeAppend(partReplayNowMs-20_000, batch(zs, -1, -1, -1, genValues(6, "zstd-lat", 50))))
	g.ok(encodeAppend(0, batch(sn, pidB, 0, 45, genValues(4, "b-snappy", 50))))
	g.ok(encodeAppend(0, batch(l4, -1, -1, -1, genValues(5, "lz4", 50))))
	// DeleteRecords inside a batch, below the start, past the end.
	g.ok(encodeDeleteRecords(first + 2))
	g.ok(encodeDeleteRecords(first))
	g.fail(encodeDeleteRecords(1_000_000), kerr.OffsetOutOfRange)
	g.fail(encodeDeleteRecords(-5), kerr.OffsetOutOfRange)
	// A delete-records entry with bytes after its offset: read as it is.
	g.ok(append(encodeDeleteRecords(second), 0xde, 0xad))

	// Term 3: sequences wrap, the window of five batches moves on.
	g.elect()
	g.ok(encodeAppend(0, batch(none, pidA, 1, 2, genValues(1, "a-e1", 30))))
	g.ok(encodeAppend(0, batch(none, pidC, 0, 2147483646, genValues(3, "c-wrap", 20)))) // sequences 2147483646, 2147483647, 0
	g.ok(encodeAppend(0, batch(gz, pidC, 0, 1, genValues(2, "c", 20))))
	var window [][]byte
	for i := int32(0); i < 6; i++ {
		window = append(window, batch(none, pidB, 0, 49+i, genValues(1, "b-window", 20)))
		g.ok(encodeAppend(0, window[i]))
	}
	// Its first batch left the window: a retry of it is out of order.
	g.fail(encodeAppend(0, window[0]), kerr.OutOfOrderSequenceNumber)
	// A retry of one still in the window.
	g.ok(encodeAppend(0, window[1]))
	// Everything deleted; appends go on at the same offsets.
	g.ok(encodeDeleteRecords(-1))
	g.ok(encodeAppend(partReplayNowMs-10_000, batch(gz, pidA, 1, 3, genValues(3, "a-after", 40))))
	g.fail(encodeAppend(0, batch(none, pidA, 1, 3, genValues(3, "a-after", 40))[:61]), kerr.CorruptMessage)
	g.ok(encodeAppend(0, batch(none, pidC, 0, 3, genValues(2, "c-after", 40))))
	return g.entries
}
