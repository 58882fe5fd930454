package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ---------------------------------------------------------------------------
// Checking a partition's records against what was acknowledged.

// logRecord is one record of a partition log.
type logRecord struct {
	Offset     int64
	Key, Value []byte
}

// seqStats counts how a partition's records compare with the acknowledged
// sequence numbers.
type seqStats struct {
	acked, found, lost, duplicated, outOfOrder, unacked, badKeys int
}

func (s seqStats) String() string {
	return fmt.Sprintf("acknowledged %d, found %d, lost %d, duplicated %d, out of order %d, present but unacknowledged %d, bad keys/values %d",
		s.acked, s.found, s.lost, s.duplicated, s.outOfOrder, s.unacked, s.badKeys)
}

// checkSeqLog compares the records of partition part (in offset order)
// with the acknowledged sequence numbers: every acknowledged record must be
// there exactly once, and sequence numbers must ascend with offsets (one
// producer). It logs the counts and reports failures with t.Errorf.
func checkSeqLog(t testing.TB, what string, part int32, recs []logRecord, acked map[int]bool) seqStats {
	t.Helper()
	var st seqStats
	st.acked = len(acked)
	seen := map[int]int{}
	prevSeq, prevOff := -1, int64(-1)
	var problems []string
	note := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	wantKey := fmt.Sprintf("k%d", part)
	for _, r := range recs {
		if r.Offset <= prevOff {
			st.outOfOrder++
			note("offset %d after offset %d", r.Offset, prevOff)
		}
		prevOff = r.Offset
		seq, err := strconv.Atoi(string(r.Value))
		if err != nil || string(r.Key) != wantKey {
			st.badKeys++
			note("offset %d: key %q value %q, want key %q and a decimal sequence", r.Offset, r.Key, r.Value, wantKey)
			continue
		}
		seen[seq]++
		if seen[seq] == 2 {
			st.duplicated++
			note("sequence %d again at offset %d", seq, r.Offset)
		} else if seen[seq] == 1 && !acked[seq] {
			st.unacked++
		}
		if seq <= prevSeq {
			st.outOfOrder++
			note("sequence %d at offset %d after sequence %d", seq, r.Offset, prevSeq)
		}
		prevSeq = seq
	}
	for seq := range acked {
		if seen[seq] > 0 {
			st.found++
		} else {
			st.lost++
			if st.lost <= 5 {
				note("acknowledged sequence %d is missing", seq)
			}
		}
	}
	t.Logf("%s, partition %d: %d records, %v", what, part, len(recs), st)
	if st.lost > 0 || st.duplicated > 0 || st.outOfOrder > 0 || st.badKeys > 0 {
		t.Errorf("%s, partition %d: %v; first problems:\n  %s", what, part, st, strings.Join(problems, "\n  "))
	}
	return st
}

// consumeAll reads partitions 0..n-1 of topic from the start up to their
// high watermarks (from ListOffsets through bs), through whichever
// brokers lead them now, with a fresh client.
func consumeAll(t testing.TB, bs []*Broker, topic string, n int32, timeout time.Duration) map[int32][]logRecord {
	t.Helper()
	adm := kadmClient(t, bs)
	ends := endOffsets(t, adm, topic)
	offsets := map[int32]kgo.Offset{}
	for p := range n {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	opts := append(replClientOpts(bs),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(300*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	out := map[int32][]logRecord{}
	last := map[int32]int64{}
	for p := range n {
		last[p] = -1
	}
	doneAll := func() bool {
		for p := range n {
			if last[p] < ends[p]-1 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(timeout)
	var errs []error
	for !doneAll() && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && len(errs) < 10 {
				errs = append(errs, fmt.Errorf("%s/%d: %w", tp, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], logRecord{Offset: r.Offset, Key: r.Key, Value: r.Value})
			last[r.Partition] = r.Offset
		})
	}
	if !doneAll() {
		t.Fatalf("consuming %s: reached offsets %v of high watermarks %v within %v; fetch errors %v", topic, last, ends, timeout, errs)
	}
	t.Logf("consumed %s up to the high watermarks %v", topic, ends)
	return out
}

// ---------------------------------------------------------------------------
// Partition logs on disk.

// partitionDirOf is <data dir>/topics/<topic>-<topic id>/<partition>.
func partitionDirOf(b *Broker, topic string, id [16]byte, partition int32) string {
	return filepath.Join(b.DataDir, "topics", topic+"-"+base64.RawURLEncoding.EncodeToString(id[:]), strconv.Itoa(int(partition)))
}

// readSegments returns file name -> contents of the *.log segment files in
// dir.
func readSegments(dir string) (map[string][]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, path := range names {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out[filepath.Base(path)] = data
	}
	return out, nil
}

// segmentsSize is the total size of the *.log files in dir and how many
// there are.
func segmentsSize(dir string) (int64, int, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return 0, 0, err
	}
	var total int64
	for _, path := range names {
		st, err := os.Stat(path)
		if err != nil {
			return 0, 0, err
		}
		total += st.Size()
	}
	return total, len(names), nil
}

// waitLogsConverge waits until, for every partition, the *.log files of
// every broker in bs have the same total size, at least minBytes, unchanged
// over three polls 300 ms apart (the replicas applied the same committed
// entries and nothing is arriving).
func waitLogsConverge(t testing.TB, bs []*Broker, topic string, id [16]byte, n int32, minBytes int64, timeout time.Duration) {
	t.Helper()
	var prev string
	stable := 0
	deadline := time.Now().Add(timeout)
	for {
		var desc strings.Builder
		equal := true
		for p := range n {
			var first int64 = -1
			for _, b := range bs {
				size, files, err := segmentsSize(partitionDirOf(b, topic, id, p))
				if err != nil {
					size, files = -1, 0
				}
				fmt.Fprintf(&desc, "p%d@node%d=%dB/%df ", p, b.NodeID, size, files)
				if first == -1 {
					first = size
				}
				if size != first || size < minBytes {
					equal = false
				}
			}
		}
		cur := desc.String()
		if equal && cur == prev {
			stable++
		} else {
			stable = 0
		}
		prev = cur
		if stable >= 2 {
			t.Logf("replica logs converged: %s", cur)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica logs of %s did not converge within %v: %s\nRaft state of its groups:\n%s", topic, timeout, cur, raftStateOf(bs, id))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// compareReplicaSegments compares, for every partition, the set of *.log
// segment files and their bytes across the (stopped) brokers in bs, and
// returns partition -> the segments of the first broker.
func compareReplicaSegments(t testing.TB, bs []*Broker, topic string, id [16]byte, n int32) map[int32]map[string][]byte {
	t.Helper()
	out := map[int32]map[string][]byte{}
	for p := range n {
		ref := bs[0]
		want, err := readSegments(partitionDirOf(ref, topic, id, p))
		if err != nil {
			t.Fatalf("reading node %d's segments of %s/%d: %v", ref.NodeID, topic, p, err)
		}
		if len(want) == 0 {
			t.Fatalf("node %d has no segment files for %s/%d in %s", ref.NodeID, topic, p, partitionDirOf(ref, topic, id, p))
		}
		out[p] = want
		var total int
		for _, d := range want {
			total += len(d)
		}
		for _, b := range bs[1:] {
			got, err := readSegments(partitionDirOf(b, topic, id, p))
			if err != nil {
				t.Fatalf("reading node %d's segments of %s/%d: %v", b.NodeID, topic, p, err)
			}
			wantNames := sortedKeys(want)
			gotNames := sortedKeys(got)
			if !slices.Equal(wantNames, gotNames) {
				t.Errorf("%s/%d: node %d has segment files %v, node %d has %v", topic, p, ref.NodeID, segDesc(want), b.NodeID, segDesc(got))
				continue
			}
			for _, name := range wantNames {
				if !bytes.Equal(want[name], got[name]) {
					t.Errorf("%s/%d segment %s: node %d's %d bytes and node %d's %d bytes differ first at byte %d",
						topic, p, name, ref.NodeID, len(want[name]), b.NodeID, len(got[name]), firstDiff(want[name], got[name]))
				}
			}
		}
		t.Logf("%s/%d: %d segment file(s), %d bytes on node %d, compared with nodes %v", topic, p, len(want), total, ref.NodeID, nodeIDs(bs[1:]))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func segDesc(m map[string][]byte) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s(%dB)", k, len(m[k])))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func nodeIDs(bs []*Broker) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = b.NodeID
	}
	return out
}

// decodeSegments decodes the record batches of a partition's segment
// files (in base offset order, which the zero-padded names sort by),
// checking each batch's CRC, and returns the data records (control batches
// are skipped).
func decodeSegments(t testing.TB, what string, segs map[string][]byte) []logRecord {
	t.Helper()
	var out []logRecord
	for _, name := range sortedKeys(segs) {
		data := segs[name]
		for pos := 0; pos < len(data); {
			if len(data)-pos < 12 {
				t.Fatalf("%s %s: %d stray bytes at position %d", what, name, len(data)-pos, pos)
			}
			size := 12 + int(int32(binary.BigEndian.Uint32(data[pos+8:])))
			if size < 61 || pos+size > len(data) {
				t.Fatalf("%s %s: batch at position %d claims %d bytes, %d left", what, name, pos, size, len(data)-pos)
			}
			raw := data[pos : pos+size]
			var batch kmsg.RecordBatch
			if err := batch.ReadFrom(raw); err != nil {
				t.Fatalf("%s %s: batch at position %d: %v", what, name, pos, err)
			}
			if crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); int32(crc) != batch.CRC {
				t.Fatalf("%s %s: batch at position %d (offset %d): CRC %08x, computed %08x", what, name, pos, batch.FirstOffset, uint32(batch.CRC), crc)
			}
			pos += size
			if batch.Attributes&0x20 != 0 { // control batch
				continue
			}
			if c := batch.Attributes & 0x07; c != 0 {
				t.Fatalf("%s %s: batch at offset %d is compressed (codec %d); the tests produce uncompressed", what, name, batch.FirstOffset, c)
			}
			recs := batch.Records
			for i := range batch.NumRecords {
				l, n := binary.Varint(recs)
				if n <= 0 || int(l) < 0 || n+int(l) > len(recs) {
					t.Fatalf("%s %s: batch at offset %d: record %d does not fit", what, name, batch.FirstOffset, i)
				}
				var r kmsg.Record
				if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
					t.Fatalf("%s %s: batch at offset %d: record %d: %v", what, name, batch.FirstOffset, i, err)
				}
				recs = recs[n+int(l):]
				out = append(out, logRecord{Offset: batch.FirstOffset + int64(r.OffsetDelta), Key: r.Key, Value: r.Value})
			}
			if len(recs) != 0 {
				t.Fatalf("%s %s: batch at offset %d: %d bytes after its %d records", what, name, batch.FirstOffset, len(recs), batch.NumRecords)
			}
		}
	}
	return out
}

// sameRecords reports the first difference between two record lists.
func sameRecords(a, b []logRecord) error {
	for i := range min(len(a), len(b)) {
		if a[i].Offset != b[i].Offset || !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) {
			return fmt.Errorf("record %d: offset %d %q=%q vs offset %d %q=%q", i, a[i].Offset, a[i].Key, a[i].Value, b[i].Offset, b[i].Key, b[i].Value)
		}
	}
	if len(a) != len(b) {
		return fmt.Errorf("%d records vs %d", len(a), len(b))
	}
	return nil
}

// partitionGroupDir is the Raft state of a partition's group on broker b:
// <data dir>/raft/p-<topic id>-<partition> (raft/store.go), whose
// snapshots/ directory is a hashicorp/raft FileSnapshotStore.
func partitionGroupDir(b *Broker, id [16]byte, partition int32) string {
	return filepath.Join(b.DataDir, "raft", "p-"+base64.RawURLEncoding.EncodeToString(id[:])+"-"+strconv.Itoa(int(partition)))
}

// raftSnapshots lists the Raft log indexes of the complete snapshots
// (meta.json written, not a .tmp directory) in a group's snapshot store.
func raftSnapshots(groupDir string) ([]uint64, error) {
	metas, err := filepath.Glob(filepath.Join(groupDir, "snapshots", "*", "meta.json"))
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, path := range metas {
		if strings.HasSuffix(filepath.Dir(path), ".tmp") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var meta struct{ Index uint64 }
		if err := json.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, meta.Index)
	}
	slices.Sort(out)
	return out, nil
}

// raftStateOf lists, for each running broker, the Raft indexes of the
// groups of topic id as its /metrics reports them (last, commit, applied,
// leader): what tells a replica lacking entries from one lacking their
// commit. Errors are reported in the text, not failed on.
func raftStateOf(bs []*Broker, id [16]byte) string {
	prefix := `group="p-` + base64.RawURLEncoding.EncodeToString(id[:]) + "-"
	var out strings.Builder
	for _, b := range bs {
		if !b.Running() {
			fmt.Fprintf(&out, "  node %d: not running\n", b.NodeID)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.AdminAddr+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			fmt.Fprintf(&out, "  node %d: %v\n", b.NodeID, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		cancel()
		for _, line := range strings.Split(string(body), "\n") {
			for _, m := range []string{"weir_raft_last_index{", "weir_raft_commit_index{", "weir_raft_applied_index{", "weir_raft_is_leader{"} {
				if strings.HasPrefix(line, m) && strings.Contains(line, prefix) {
					fmt.Fprintf(&out, "  node %d: %s\n", b.NodeID, line)
				}
			}
		}
	}
	return out.String()
}
