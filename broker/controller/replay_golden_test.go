package controller_test

// Replay safety of the controller state machine: golden logs written once
// by a release (testdata/replay/vN.log) are replayed through a fresh FSM
// by the current code, which must answer every entry as recorded
// (vN.results.txt) and end in byte-identical state (vN.snapshot). See
// testdata/replay/README.md.
//
// This is an external test package so that the replay runs with the
// validators the broker gives the controller (broker.ValidateTopicConfig,
// the property registry, license verification): they run inside Apply,
// and a change to what they accept changes how old entries apply.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
	weirraft "github.com/weir-broker/weir/raft"
	"github.com/weir-broker/weir/raft/replaytest"
)

const (
	replayDir  = "testdata/replay"
	replayKind = "controller"
	// newestControllerReplay is the version -write-golden writes when
	// its log does not exist yet. Raise it, with a generator of its own,
	// to record a new golden log (new commands, new command versions);
	// older versions stay and keep being replayed.
	newestControllerReplay = 1
)

// controllerGenerators write each version's log. A generator runs only
// when its version's log does not exist (-write-golden).
var controllerGenerators = map[int]func(t *testing.T) []replaytest.Entry{
	1: generateControllerV1,
}

// controllerLogSHA256 pins each golden log's bytes. A log, once
// committed, never changes; -write-golden prints the checksum of a new
// one to record here.
var controllerLogSHA256 = map[int]string{
	1: "00ef5c0f0ca4181326ead7dbbcf830d1108e7fc8661b3aaec0a93c9b0e97543d",
}

// goldenLicenseKey signs the licenses of the golden logs; replays trust
// its public half, as brokers trust the vendor's.
var goldenLicenseKey = ed25519.NewKeyFromSeed(seed32("weir controller replay: license key"))

func seed32(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// replayOptions are the options broker.openController gives the state,
// with the golden license key trusted instead of the vendor's.
func replayOptions() controller.Options {
	keys := []ed25519.PublicKey{goldenLicenseKey.Public().(ed25519.PublicKey)}
	return controller.Options{
		ValidateTopicConfig: broker.ValidateTopicConfig,
		Properties:          config.NewRegistry(),
		ValidateLicense: func(blob []byte) error {
			_, err := config.ParseLicense(string(blob), keys)
			return err
		},
	}
}

// entryOutput is what replaying one entry gave.
type entryOutput struct {
	text     string // the entry's lines of the results file
	result   string // of which the result's
	detail   string // error messages (not recorded: wording may change)
	snapshot []byte // the state after the entry
}

// replayController applies entries to fsm as a Raft group hands them over
// (commands to Apply, configurations to MembershipApplied, no-ops and
// barriers not at all).
func replayController(t *testing.T, fsm *controller.Machine, entries []replaytest.Entry) []entryOutput {
	t.Helper()
	out := make([]entryOutput, 0, len(entries))
	for _, e := range entries {
		var b strings.Builder
		var detail, result string
		fmt.Fprintf(&b, "entry %d term %d %s\n", e.Index, e.Term, describeControllerEntry(e))
		switch e.Type {
		case replaytest.TypeCommand:
			res, ok := fsm.Apply(weirraft.Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)}).(controller.Result)
			if !ok {
				t.Fatalf("entry %d: Apply returned no controller.Result", e.Index)
			}
			result = formatResult(e.Index, res)
			if res.Err != nil {
				detail = res.Err.Error()
			}
		case replaytest.TypeConfiguration:
			fsm.MembershipApplied(e.Index)
			result = "  result configuration stored\n"
		default:
			result = "  result not handed to the FSM\n"
		}
		b.WriteString(result)
		snap, err := fsm.State().SnapshotBytes()
		if err != nil {
			t.Fatalf("entry %d: snapshot: %v", e.Index, err)
		}
		sum := sha256.Sum256(snap)
		fmt.Fprintf(&b, "  state index %d sha256 %s\n", fsm.State().View().Index(), hex.EncodeToString(sum[:8]))
		out = append(out, entryOutput{text: b.String(), result: result, detail: detail, snapshot: snap})
	}
	return out
}

// describeControllerEntry renders an entry from its raw bytes (not with
// Decode, whose answer is part of what is checked).
func describeControllerEntry(e replaytest.Entry) string {
	if e.Type != replaytest.TypeCommand {
		return replaytest.TypeName(e.Type)
	}
	d := e.Data
	if len(d) < 11 || d[0] != 0xC7 {
		return fmt.Sprintf("command raw %d bytes %s", len(d), clip(hex.EncodeToString(d), 48))
	}
	ts := int64(binary.BigEndian.Uint64(d[3:]))
	return fmt.Sprintf("command %v v%d time %d body %s", controller.CommandType(d[1]), d[2], ts, clip(string(d[11:]), 400))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:n], len(s))
}

func formatResult(index uint64, r controller.Result) string {
	var b strings.Builder
	b.WriteString("  result ")
	if r.Err != nil {
		code := r.ErrorCode()
		name := "UNKNOWN"
		var ke *kerr.Error
		if errors.As(kerr.ErrorForCode(code), &ke) {
			name = ke.Message
		}
		fmt.Fprintf(&b, "error %s(%d)", name, code)
		var conflict *controller.NodeIDConflictError
		if errors.As(r.Err, &conflict) {
			b.WriteString(" node_id_conflict")
		}
	} else {
		b.WriteString("ok")
	}
	fmt.Fprintf(&b, " changed=%v broker_epoch=%d config_version=%d license_version=%d first_producer_id=%d",
		r.Changed, r.BrokerEpoch, r.ConfigVersion, r.LicenseVersion, r.FirstProducerID)
	if r.Index != index {
		fmt.Fprintf(&b, " index=%d", r.Index)
	}
	b.WriteString("\n")
	if r.Topic != nil {
		fmt.Fprintf(&b, "  topic %s\n", mustJSON(r.Topic))
	}
	if r.DeletedACLs != nil {
		fmt.Fprintf(&b, "  deleted_acls %s\n", mustJSON(r.DeletedACLs))
	}
	return b.String()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

const resultsHeader = `# Expected results of replaying %s through a fresh controller FSM: per
# entry, what Apply answered (error code, result values) and a hash of the
# snapshot after it. Written by TestControllerReplayGolden; never edit it
# by hand. testdata/replay/README.md says when it may be regenerated.
`

func resultsText(logName string, outs []entryOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, resultsHeader, logName)
	for _, o := range outs {
		b.WriteString(o.text)
	}
	return b.String()
}

func TestControllerReplayGolden(t *testing.T) {
	if *replaytest.WriteGolden {
		writeControllerGolden(t, newestControllerReplay)
	}
	versions, err := replaytest.Versions(replayDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { checkControllerGolden(t, v) })
	}
}

func goldenPaths(v int) (logPath, resultsPath, snapshotPath string) {
	return replaytest.Paths(replayDir, v, ".snapshot")
}

// writeControllerGolden writes version v's log and expectations, which
// must not exist.
func writeControllerGolden(t *testing.T, v int) {
	logPath, resultsPath, snapshotPath := goldenPaths(v)
	if _, err := os.Stat(logPath); err == nil {
		t.Logf("-write-golden: %s exists and is never rewritten; raise newestControllerReplay (with a generator) to write a new version", logPath)
		return
	}
	gen := controllerGenerators[v]
	if gen == nil {
		t.Fatalf("-write-golden: no generator for version %d", v)
	}
	entries := gen(t)
	data, err := replaytest.Encode(replayKind, entries)
	if err != nil {
		t.Fatal(err)
	}
	outs := replayController(t, controller.NewMachine(controller.New(replayOptions())), entries)
	for _, f := range []struct {
		path string
		data []byte
	}{
		{logPath, data},
		{resultsPath, []byte(resultsText(filepath.Base(logPath), outs))},
		{snapshotPath, outs[len(outs)-1].snapshot},
	} {
		if err := replaytest.CreateNew(f.path, f.data); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(data)
	t.Logf("-write-golden: wrote %s (%d entries) and its expectations; pin its SHA-256 %x in the test", logPath, len(entries), sum)
}

func checkControllerGolden(t *testing.T, v int) {
	logPath, resultsPath, snapshotPath := goldenPaths(v)
	entries, err := replaytest.ReadPinned(logPath, replayKind, controllerLogSHA256[v])
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatalf("%s holds no entries", logPath)
	}
	outs := replayController(t, controller.NewMachine(controller.New(replayOptions())), entries)
	gotResults := resultsText(filepath.Base(logPath), outs)
	gotSnap := outs[len(outs)-1].snapshot
	if *replaytest.UpdateExpectations {
		if err := os.WriteFile(resultsPath, []byte(gotResults), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(snapshotPath, gotSnap, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("-update-replay-expectations: rewrote %s and %s", resultsPath, snapshotPath)
	}
	wantResults, err := os.ReadFile(resultsPath)
	if err != nil {
		t.Fatalf("%v (expectations are written with the log by -write-golden)", err)
	}
	wantSnap, err := os.ReadFile(snapshotPath)
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
		if strings.HasPrefix(w, "  state ") {
			detail += "\nthe state after it differs; at the end of the log, " + describeSnapshotDiff(wantSnap, gotSnap)
		}
		t.Fatalf("replaying %s diverges from %s at line %d, first diverging entry:\n  %s\nwant: %q\ngot:  %q%s\n\n%s",
			logPath, resultsPath, line, entry, w, g, detail, divergenceAdvice)
	}
	if !bytes.Equal(gotSnap, wantSnap) {
		t.Fatalf("replaying %s ends in a snapshot that differs from %s: %s\n%s\n\n%s",
			logPath, snapshotPath, describeByteDiff(wantSnap, gotSnap), describeSnapshotDiff(wantSnap, gotSnap), divergenceAdvice)
	}

	// The replay is deterministic: a second one gives the same bytes.
	again := replayController(t, controller.NewMachine(controller.New(replayOptions())), entries)
	for i := range outs {
		if again[i].text != outs[i].text || !bytes.Equal(again[i].snapshot, outs[i].snapshot) {
			t.Fatalf("two replays of %s differ at entry %d: apply or the snapshot encoding is not deterministic\n%s\n%s",
				logPath, entries[i].Index, outs[i].text, again[i].text)
		}
	}

	// Applied in batches, as hashicorp/raft hands over entries committed
	// together, every entry gets the same result, every batch ends in the
	// state the entries one at a time reach, and the view published
	// before a batch is the same after it.
	for seed := range int64(4) {
		checkBatchedReplay(t, logPath, entries, outs, rand.New(rand.NewPCG(uint64(seed), 0)))
	}

	// A replica that installs the snapshot taken after any entry and
	// applies the rest ends where the full replay does: the snapshot
	// holds the whole state.
	step := 1
	if testing.Short() {
		step = 10
	}
	for k := 0; k < len(entries)-1; k += step {
		fsm := controller.NewMachine(controller.New(replayOptions()))
		if err := fsm.State().Restore(bytes.NewReader(outs[k].snapshot)); err != nil {
			t.Fatalf("restore the snapshot after entry %d: %v", entries[k].Index, err)
		}
		if snap, _ := fsm.State().SnapshotBytes(); !bytes.Equal(snap, outs[k].snapshot) {
			t.Fatalf("the snapshot after entry %d does not encode again to the same bytes: %s",
				entries[k].Index, describeByteDiff(outs[k].snapshot, snap))
		}
		rest := replayController(t, fsm, entries[k+1:])
		for j, o := range rest {
			if want := outs[k+1+j]; o.text != want.text {
				t.Fatalf("restored from the snapshot after entry %d, entry %d applies differently:\nwant:\n%s\ngot:\n%s",
					entries[k].Index, entries[k+1+j].Index, want.text, o.text)
			}
		}
	}
}

// checkBatchedReplay applies entries in batches of random lengths (up to
// 64, hashicorp's MaxAppendEntries) the way raft's batch adapter does:
// each run of commands in one ApplyBatch, a configuration between runs to
// MembershipApplied, other entries to neither.
func checkBatchedReplay(t *testing.T, logPath string, entries []replaytest.Entry, outs []entryOutput, rng *rand.Rand) {
	t.Helper()
	fsm := controller.NewMachine(controller.New(replayOptions()))
	for start := 0; start < len(entries); {
		end := min(start+1+rng.IntN(64), len(entries))
		before := fsm.State().View()
		var beforeSnap bytes.Buffer
		if err := before.EncodeSnapshot(&beforeSnap); err != nil {
			t.Fatal(err)
		}
		var run []weirraft.Entry
		var runAt []int
		flush := func() {
			if len(run) == 0 {
				return
			}
			results := fsm.ApplyBatch(run)
			if len(results) != len(run) {
				t.Fatalf("ApplyBatch: %d results for %d entries", len(results), len(run))
			}
			for j, r := range results {
				res, ok := r.(controller.Result)
				if !ok {
					t.Fatalf("entry %d: ApplyBatch returned no controller.Result", run[j].Index)
				}
				if got, want := formatResult(run[j].Index, res), outs[runAt[j]].result; got != want {
					t.Fatalf("%s in a batch of %d from entry %d: entry %d gets\n%s\nwant (one at a time)\n%s",
						logPath, end-start, entries[start].Index, run[j].Index, got, want)
				}
			}
			run, runAt = run[:0], runAt[:0]
		}
		for i := start; i < end; i++ {
			e := entries[i]
			switch e.Type {
			case replaytest.TypeCommand:
				run = append(run, weirraft.Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)})
				runAt = append(runAt, i)
			case replaytest.TypeConfiguration:
				flush()
				fsm.MembershipApplied(e.Index)
			}
		}
		flush()
		snap, err := fsm.State().SnapshotBytes()
		if err != nil {
			t.Fatal(err)
		}
		if want := outs[end-1].snapshot; !bytes.Equal(snap, want) {
			t.Fatalf("%s: the batch of entries %d..%d ends in another state than the entries one at a time: %s",
				logPath, entries[start].Index, entries[end-1].Index, describeSnapshotDiff(want, snap))
		}
		var again bytes.Buffer
		if err := before.EncodeSnapshot(&again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), beforeSnap.Bytes()) {
			t.Fatalf("%s: the batch of entries %d..%d changed the view published before it: %s",
				logPath, entries[start].Index, entries[end-1].Index, describeSnapshotDiff(beforeSnap.Bytes(), again.Bytes()))
		}
		start = end
	}
}

const divergenceAdvice = `The current code applies an entry that an earlier release committed
differently: a replica replaying its log after an upgrade, or replicas of
different releases in one cluster, would end in different states. Gate the
change behind a cluster feature (metadata) version so that entries written
before it apply as they did, or revert it. Regenerate the expectations
(-update-replay-expectations) only as testdata/replay/README.md describes.`

// describeByteDiff says where two byte strings first differ, with some
// context.
func describeByteDiff(want, got []byte) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	from := max(0, i-60)
	return fmt.Sprintf("%d bytes, want %d; first difference at byte %d:\nwant ...%q...\ngot  ...%q...",
		len(got), len(want), i, want[from:min(len(want), i+60)], got[from:min(len(got), i+60)])
}

// describeSnapshotDiff shows the first line in which two snapshots'
// JSON bodies, indented, differ.
func describeSnapshotDiff(want, got []byte) string {
	indent := func(snap []byte) string {
		var b bytes.Buffer
		if len(snap) < 14 || json.Indent(&b, snap[10:len(snap)-4], "", " ") != nil {
			return fmt.Sprintf("(not a snapshot: %d bytes)", len(snap))
		}
		return b.String()
	}
	line, w, g, _, ok := replaytest.FirstDiff(indent(want), indent(got), "")
	if ok {
		return "the snapshots' JSON bodies are equal"
	}
	return fmt.Sprintf("the snapshots' JSON (indented) first differs at line %d:\nwant: %s\ngot:  %s", line, w, g)
}
