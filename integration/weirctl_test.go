package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// weirctl drives the real weirctl binary against one broker. Every command
// runs under a deadline so a hung CLI fails the test instead of the suite.
type weirctl struct {
	bin     string
	brokers string
}

type weirctlResult struct {
	args           []string
	stdout, stderr string
	exitCode       int
}

func (r weirctlResult) String() string {
	return fmt.Sprintf("weirctl %s\nexit %d\n--- stdout ---\n%s\n--- stderr ---\n%s",
		strings.Join(r.args, " "), r.exitCode, r.stdout, r.stderr)
}

func newWeirctl(t testing.TB, b *Broker) *weirctl {
	return &weirctl{bin: WeirctlBinary(t), brokers: b.KafkaAddr}
}

func (w *weirctl) exec(t testing.TB, timeout time.Duration, stdin string, args ...string) weirctlResult {
	t.Helper()
	full := append([]string{"--brokers", w.brokers, "--timeout", "15s"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.bin, full...)
	cmd.WaitDelay = 5 * time.Second
	// WEIR_BROKERS from the developer's shell must not redirect the test.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "WEIR_BROKERS=") })
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	res := weirctlResult{args: full, stdout: out.String(), stderr: errOut.String()}
	if ctx.Err() != nil {
		t.Fatalf("timed out after %v:\n%s", timeout, res)
	}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running weirctl: %v\n%s", err, res)
		}
		res.exitCode = ee.ExitCode()
	}
	return res
}

// ok runs a command that must succeed.
func (w *weirctl) ok(t testing.TB, stdin string, args ...string) weirctlResult {
	t.Helper()
	r := w.exec(t, 60*time.Second, stdin, args...)
	if r.exitCode != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	return r
}

// fails runs a command that must exit non-zero and mention want.
func (w *weirctl) fails(t testing.TB, want string, args ...string) weirctlResult {
	t.Helper()
	r := w.exec(t, 60*time.Second, "", args...)
	if r.exitCode == 0 {
		t.Fatalf("want non-zero exit:\n%s", r)
	}
	if !strings.Contains(r.stdout+r.stderr, want) {
		t.Fatalf("want output mentioning %q:\n%s", want, r)
	}
	return r
}

func decodeJSON[T any](t testing.TB, r weirctlResult) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not the expected JSON (%v):\n%s", err, r)
	}
	return v
}

// decodeJSONLines parses the one-object-per-line output of produce/consume.
func decodeJSONLines[T any](t testing.TB, r weirctlResult) []T {
	t.Helper()
	var out []T
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %q is not JSON (%v):\n%s", sc.Text(), err, r)
		}
		out = append(out, v)
	}
	return out
}

// Shapes of weirctl's JSON output, restated here so a change to the CLI's
// contract breaks this test rather than passing silently.
type (
	wcTopicResult struct {
		Topic        string `json:"topic"`
		ID           string `json:"id"`
		Partitions   int32  `json:"partitions"`
		Replicas     int16  `json:"replicas"`
		DryRun       bool   `json:"dry_run"`
		Error        string `json:"error"`
		ErrorMessage string `json:"error_message"`
	}
	wcTopicSummary struct {
		Name       string `json:"name"`
		Partitions int    `json:"partitions"`
		Replicas   int    `json:"replicas"`
		ID         string `json:"id"`
	}
	wcPartition struct {
		Partition      int32   `json:"partition"`
		Leader         int32   `json:"leader"`
		Replicas       []int32 `json:"replicas"`
		ISR            []int32 `json:"isr"`
		LogStartOffset int64   `json:"log_start_offset"`
		HighWatermark  int64   `json:"high_watermark"`
		Error          string  `json:"error"`
	}
	wcConfig struct {
		Name   string  `json:"name"`
		Value  *string `json:"value"`
		Source string  `json:"source"`
	}
	wcDescription struct {
		Name       string        `json:"name"`
		ID         string        `json:"id"`
		Partitions []wcPartition `json:"partitions"`
		Configs    []wcConfig    `json:"configs"`
	}
	wcProduced struct {
		Line      int    `json:"line"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Error     string `json:"error"`
	}
	wcConsumed struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Offset    int64   `json:"offset"`
		Timestamp string  `json:"timestamp"`
		Key       *string `json:"key"`
		Value     *string `json:"value"`
	}
	wcBench struct {
		Mode          string  `json:"mode"`
		Records       int64   `json:"records"`
		Bytes         int64   `json:"bytes"`
		Errors        int64   `json:"errors"`
		Seconds       float64 `json:"seconds"`
		RecordsPerSec float64 `json:"records_per_sec"`
		MBPerSec      float64 `json:"mb_per_sec"`
		P50Ms         float64 `json:"p50_ms"`
		P95Ms         float64 `json:"p95_ms"`
		P99Ms         float64 `json:"p99_ms"`
		MaxMs         float64 `json:"max_ms"`
		Stopped       string  `json:"stopped"`
	}
)

func listTopicsJSON(t testing.TB, w *weirctl) map[string]wcTopicSummary {
	t.Helper()
	list := decodeJSON[[]wcTopicSummary](t, w.ok(t, "", "topic", "list", "--format", "json"))
	m := make(map[string]wcTopicSummary, len(list))
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

func TestWeirctlEndToEnd(t *testing.T) {
	b := StartBroker(t)
	w := newWeirctl(t, b)
	const topic = "weirctl-e2e"

	step := func(name string, fn func(t *testing.T)) {
		if !t.Run(name, fn) {
			t.FailNow() // later steps build on earlier ones
		}
	}

	step("create", func(t *testing.T) {
		r := w.ok(t, "", "topic", "create", topic, "-p", "3", "-r", "1", "-c", "retention.ms=3600000", "--format", "json")
		res := decodeJSON[[]wcTopicResult](t, r)
		if len(res) != 1 || res[0].Topic != topic || res[0].Error != "" {
			t.Fatalf("create result: %+v", res)
		}
		if res[0].Partitions != 3 || res[0].Replicas != 1 {
			t.Errorf("create reported %d partitions x %d replicas, want 3 x 1", res[0].Partitions, res[0].Replicas)
		}
		waitTopicReady(t, b, topic, 3)

		w.fails(t, "TOPIC_ALREADY_EXISTS", "topic", "create", topic, "-p", "3")
	})

	step("dry-run create", func(t *testing.T) {
		const ghost = "weirctl-dry-run"
		res := decodeJSON[[]wcTopicResult](t, w.ok(t, "", "topic", "create", ghost, "-p", "2", "--dry-run", "--format", "json"))
		if len(res) != 1 || res[0].Error != "" || !res[0].DryRun {
			t.Fatalf("dry-run result: %+v", res)
		}
		if _, ok := listTopicsJSON(t, w)[ghost]; ok {
			t.Errorf("--dry-run (validate_only) created topic %s", ghost)
		}
	})

	step("list", func(t *testing.T) {
		s, ok := listTopicsJSON(t, w)[topic]
		if !ok {
			t.Fatalf("topic %s not in list", topic)
		}
		if s.Partitions != 3 || s.Replicas != 1 || s.ID == "" {
			t.Errorf("list entry: %+v, want 3 partitions, 1 replica, a topic ID", s)
		}
		table := w.ok(t, "", "topic", "list").stdout
		if !strings.HasPrefix(table, "NAME") || !strings.Contains(table, topic) {
			t.Errorf("table output:\n%s", table)
		}
	})

	step("describe empty", func(t *testing.T) {
		d := decodeJSON[wcDescription](t, w.ok(t, "", "topic", "describe", topic, "--format", "json"))
		if d.Name != topic || d.ID == "" || len(d.Partitions) != 3 {
			t.Fatalf("describe: %+v", d)
		}
		for i, p := range d.Partitions {
			if p.Partition != int32(i) || p.Leader < 0 || len(p.Replicas) != 1 || p.Error != "" {
				t.Errorf("partition %d: %+v", i, p)
			}
			if p.LogStartOffset != 0 || p.HighWatermark != 0 {
				t.Errorf("partition %d of a new topic: log start %d, high watermark %d, want 0, 0", i, p.LogStartOffset, p.HighWatermark)
			}
		}
		var found bool
		for _, c := range d.Configs {
			if c.Name == "retention.ms" {
				found = true
				if c.Value == nil || *c.Value != "3600000" {
					t.Errorf("retention.ms = %v, want 3600000", c.Value)
				}
				if c.Source != "topic" {
					t.Errorf("retention.ms source %q, want topic (DYNAMIC_TOPIC_CONFIG)", c.Source)
				}
			}
		}
		if !found {
			t.Errorf("retention.ms missing from configs: %+v", d.Configs)
		}
	})

	lines := make([]string, 100)
	for i := range lines {
		lines[i] = fmt.Sprintf("line-%03d", i)
	}
	// Where produce said each value went; consume must find it there.
	placed := map[[2]int64]string{}

	step("produce stdin", func(t *testing.T) {
		r := w.ok(t, strings.Join(lines, "\n")+"\n", "produce", topic, "--format", "json")
		res := decodeJSONLines[wcProduced](t, r)
		if len(res) != len(lines) {
			t.Fatalf("got %d results for %d lines:\n%s", len(res), len(lines), r)
		}
		for i, p := range res {
			if p.Line != i+1 || p.Error != "" || p.Partition < 0 || p.Partition > 2 || p.Offset < 0 {
				t.Fatalf("result %d: %+v", i, p)
			}
			key := [2]int64{int64(p.Partition), p.Offset}
			if prev, dup := placed[key]; dup {
				t.Fatalf("%s and %s both acknowledged at %d@%d", prev, lines[i], p.Partition, p.Offset)
			}
			placed[key] = lines[i]
		}

		d := decodeJSON[wcDescription](t, w.ok(t, "", "topic", "describe", topic, "--format", "json"))
		var total int64
		for _, p := range d.Partitions {
			total += p.HighWatermark - p.LogStartOffset
		}
		if total != 100 {
			t.Errorf("high watermarks add up to %d records, want 100: %+v", total, d.Partitions)
		}
	})

	step("consume", func(t *testing.T) {
		r := w.ok(t, "", "consume", topic, "-n", "100", "--format", "json")
		recs := decodeJSONLines[wcConsumed](t, r)
		if len(recs) != 100 {
			t.Fatalf("consumed %d records, want 100:\n%s", len(recs), r)
		}
		var got []string
		for _, rec := range recs {
			if rec.Topic != topic || rec.Value == nil || rec.Key != nil || rec.Timestamp == "" {
				t.Fatalf("record: %+v", rec)
			}
			if want := placed[[2]int64{int64(rec.Partition), rec.Offset}]; *rec.Value != want {
				t.Errorf("%d@%d holds %q, produce acknowledged %q there", rec.Partition, rec.Offset, *rec.Value, want)
			}
			got = append(got, *rec.Value)
		}
		slices.Sort(got)
		if !slices.Equal(got, lines) {
			t.Errorf("consumed values differ from produced lines")
		}

		table := w.ok(t, "", "consume", topic, "-n", "3").stdout
		if n := strings.Count(table, "\n"); n != 4 || !strings.HasPrefix(table, "PARTITION") {
			t.Errorf("table consume of 3 records, want header + 3 rows:\n%s", table)
		}
	})

	step("produce value with key to partition", func(t *testing.T) {
		r := w.ok(t, "", "produce", topic, "--value", "single", "-k", "k1", "-p", "1", "--acks", "1", "--compression", "zstd")
		var p, off int64
		if _, err := fmt.Sscanf(r.stdout, "%d@%d\n", &p, &off); err != nil || p != 1 {
			t.Fatalf("want 1@OFFSET:\n%s", r)
		}
		all := decodeJSONLines[wcConsumed](t, w.ok(t, "", "consume", topic, "-n", "101", "--format", "json"))
		var found bool
		for _, rec := range all {
			if rec.Partition == 1 && rec.Offset == off {
				found = true
				if rec.Key == nil || *rec.Key != "k1" || rec.Value == nil || *rec.Value != "single" {
					t.Errorf("record at 1@%d: %+v", off, rec)
				}
			}
		}
		if !found {
			t.Errorf("record 1@%d not consumed", off)
		}
	})

	const benchTopic = "weirctl-bench"
	step("bench produce", func(t *testing.T) {
		r := w.ok(t, "", "bench", "produce", benchTopic, "--records", "20000", "--record-size", "200", "--partitions", "3", "--format", "json")
		s := decodeJSON[wcBench](t, r)
		if s.Records != 20000 || s.Bytes != 20000*200 || s.Errors != 0 || s.Stopped != "records" {
			t.Errorf("summary: %+v", s)
		}
		if s.Seconds <= 0 || s.RecordsPerSec <= 0 || s.MBPerSec <= 0 {
			t.Errorf("rates must be positive: %+v", s)
		}
		if s.P50Ms <= 0 || s.P50Ms > s.P95Ms || s.P95Ms > s.P99Ms || s.P99Ms > s.MaxMs {
			t.Errorf("latencies must be positive and ordered: %+v", s)
		}
		t.Logf("bench produce: %.0f rec/s, %.2f MB/s, p50 %.2fms p99 %.2fms", s.RecordsPerSec, s.MBPerSec, s.P50Ms, s.P99Ms)
	})

	step("bench consume", func(t *testing.T) {
		r := w.ok(t, "", "bench", "consume", benchTopic, "--records", "20000", "--consumers", "2", "--format", "json")
		s := decodeJSON[wcBench](t, r)
		if s.Records != 20000 || s.Bytes != 20000*200 || s.Errors != 0 || s.Stopped != "records" {
			t.Errorf("summary: %+v", s)
		}
		if s.Seconds <= 0 || s.RecordsPerSec <= 0 || s.MBPerSec <= 0 {
			t.Errorf("rates must be positive: %+v", s)
		}
		t.Logf("bench consume: %.0f rec/s, %.2f MB/s", s.RecordsPerSec, s.MBPerSec)
	})

	step("delete", func(t *testing.T) {
		res := decodeJSON[[]wcTopicResult](t, w.ok(t, "", "topic", "delete", topic, benchTopic, "--format", "json"))
		if len(res) != 2 || res[0].Error != "" || res[1].Error != "" {
			t.Fatalf("delete: %+v", res)
		}
		topics := listTopicsJSON(t, w)
		for _, name := range []string{topic, benchTopic} {
			if _, ok := topics[name]; ok {
				t.Errorf("topic %s still listed after delete", name)
			}
		}
		w.fails(t, "UNKNOWN_TOPIC_OR_PARTITION", "topic", "describe", topic)
		w.fails(t, "UNKNOWN_TOPIC_OR_PARTITION", "topic", "delete", topic)
	})
}

func TestWeirctlErrors(t *testing.T) {
	b := StartBroker(t)
	w := newWeirctl(t, b)
	w.fails(t, "UNKNOWN_TOPIC_OR_PARTITION", "consume", "no-such-topic", "-n", "1")
	w.fails(t, "UNKNOWN_TOPIC_OR_PARTITION", "topic", "describe", "no-such-topic")
	w.fails(t, "--partitions", "topic", "create", "bad", "-p", "0")
	w.fails(t, "INVALID_TOPIC_EXCEPTION", "topic", "create", "bad/name", "-p", "1")
	w.fails(t, "INVALID_CONFIG", "topic", "create", "bad-config", "-c", "retention.ms=soon")
}

// TestWeirctlBenchBounded checks that bench always ends: by --duration, and
// by the stall timeout when the topic holds fewer records than asked for.
func TestWeirctlBenchBounded(t *testing.T) {
	b := StartBroker(t)
	w := newWeirctl(t, b)
	const topic = "weirctl-bounded"

	s := decodeJSON[wcBench](t, w.ok(t, "", "bench", "produce", topic, "-p", "1",
		"--records", "1000000000", "--record-size", "10", "--duration", "1s", "--format", "json"))
	if s.Stopped != "duration" || s.Records <= 0 || s.Records >= 1000000000 || s.Errors != 0 {
		t.Errorf("duration-bounded produce: %+v", s)
	}

	// Ask for one more record than exists: consume must stall, say so,
	// exit non-zero, and still report what it read.
	r := w.exec(t, 60*time.Second, "", "bench", "consume", topic, "--records", fmt.Sprint(s.Records+1),
		"--timeout", "2s", "--format", "json")
	if r.exitCode == 0 || !strings.Contains(r.stderr, "no record completed") {
		t.Fatalf("want a stall error:\n%s", r)
	}
	c := decodeJSON[wcBench](t, r)
	if c.Stopped != "stalled" || c.Records != s.Records {
		t.Errorf("stalled consume read %d of %d records: %+v", c.Records, s.Records, c)
	}
}
