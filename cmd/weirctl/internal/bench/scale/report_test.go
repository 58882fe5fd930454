package scale

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
)

// writeScaleFixture lays out a bench-scale output directory: weir with
// one run that did not settle and a failover that timed out, Kafka
// complete, and a baseline that was skipped.
func writeScaleFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	put := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sample := func(rss, fds, disk int64, cpu float64, goroutines string) string {
		return `{"window_seconds": 30, "brokers": [], "total": {"rss_kib": ` + itoa(rss) + `, "threads": 30, "goroutines": ` + goroutines +
			`, "fds": ` + itoa(fds) + `, "disk_kib": ` + itoa(disk) + `, "cpu_percent": ` + ftoa(cpu) + `}}`
	}
	put("systems", "weir-baseline\nweir\nkafka\n")
	put("params.json", `{"partitions": [1000]}`)
	put("weir-baseline/label", "weir HEAD (abc123), the baseline\n")
	put("weir-baseline/skipped", "building failed\n")
	put("weir/label", "weir v1\n")
	put("weir/p1000/empty.json", sample(300*1024, 300, 1024, 3, "600"))
	put("weir/p1000/create.json", `{"topic": "scale-1000", "partitions": 1000, "replication_factor": 3, "create_seconds": 12.5,
		"settled": false, "settle_seconds": null, "settle_timeout_seconds": 300, "pending": 40}`)
	put("weir/p1000/idle.json", sample(300*1024+3000*100, 300+3000*2, 1024+1000*64, 45, "6600"))
	put("weir/p1000/layout.json", `{"brokers": [0,1,2], "partitions": 1000, "settled": 960, "leaders": {"0": 400, "1": 300, "2": 300}, "most_leaders": 0, "most_leaders_count": 400}`)
	put("weir/p1000/failover.json", `{"until": "moved", "broker": 0, "met": false, "seconds": null, "timeout_seconds": 60}`)
	put("weir/p1000/recover.json", `{"until": "settled", "met": true, "seconds": 20, "timeout_seconds": 120}`)
	put("weir/p1000/notes", "something odd\n")
	put("weir/produce/producer-0.json", `{"records": 1000, "bytes": 1048576, "seconds": 2, "p99_ms": 30, "stopped": "records"}`)
	put("weir/produce/producer-1.json", `{"records": 1000, "bytes": 1048576, "seconds": 4, "p99_ms": 50, "stopped": "records"}`)
	put("weir/produce/warmup-0.json", `{"records": 9, "bytes": 9, "seconds": 9, "stopped": "failed"}`)
	put("kafka/label", "Apache Kafka 4.1.2\n")
	put("kafka/p1000/empty.json", sample(1000*1024, 400, 100, 10, "null"))
	put("kafka/p1000/create.json", `{"topic": "scale-1000", "partitions": 1000, "replication_factor": 3, "create_seconds": 0.5,
		"settled": true, "settle_seconds": 0.8, "settle_timeout_seconds": 300, "pending": 0}`)
	put("kafka/p1000/idle.json", sample(1000*1024+3000*50, 400+3000, 100+1000*20, 15, "null"))
	put("kafka/p1000/failover.json", `{"until": "moved", "broker": 1, "met": true, "seconds": 10, "timeout_seconds": 60}`)
	put("kafka/produce/producer-0.json", `{"records": 4000, "bytes": 4194304, "seconds": 2, "p99_ms": 10, "stopped": "records"}`)
	// A producer that died before its summary: the phase is incomplete.
	put("kafka/produce/producer-1.json", "")
	return dir
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func TestScaleReportFigures(t *testing.T) {
	rep, err := loadScaleReport(writeScaleFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Systems) != 3 || rep.Systems[0].Skipped != "building failed" {
		t.Fatalf("systems %+v", rep.Systems)
	}
	weir := rep.Systems[1]
	f := weir.Runs[0].Figures
	if f.Replicas != 3000 || *f.RSSKiBPerReplica != 100 || *f.FDsPerReplica != 2 || *f.DiskKiBPerPartition != 64 || *f.GoroutinesPerReplica != 2 {
		t.Fatalf("weir figures %+v", f)
	}
	if f.SettleSeconds != nil || f.FailoverSeconds != nil || *f.RecoverSeconds != 20 || *f.KilledBroker != 0 || *f.KilledBrokerLed != 400 {
		t.Fatalf("weir times %+v", f)
	}
	p := weir.Produce
	// Two producers, 2 MiB over the slowest one's 4 s.
	if !p.Complete || p.Producers != 2 || p.MBPerSec != 0.5 || p.RecordsPerSec != 500 || p.MaxP99Ms != 50 {
		t.Fatalf("weir produce %+v", p)
	}
	if k := rep.Systems[2].Produce; k.Complete || k.Producers != 2 {
		t.Fatalf("kafka produce with a missing summary %+v", k)
	}
	kf := rep.Systems[2].Runs[0].Figures
	if kf.GoroutinesPerReplica != nil || *kf.RSSKiBPerReplica != 50 {
		t.Fatalf("kafka figures %+v", kf)
	}
	ratios := map[string]*float64{}
	for _, c := range rep.Comparisons {
		ratios[c.Metric] = c.Ratios["weir/kafka"]
		if _, ok := c.Ratios["weir/weir-baseline"]; ok {
			t.Errorf("%s: a ratio to the skipped baseline", c.Metric)
		}
	}
	if r := ratios["RSS KiB / replica"]; r == nil || *r != 2 {
		t.Errorf("RSS ratio %v, want 2", r)
	}
	for _, m := range []string{"all led + full ISR s", "failover: re-led s", "produce MB/s"} {
		if ratios[m] != nil {
			t.Errorf("%s: ratio %v of a figure not reached", m, *ratios[m])
		}
	}
}

func TestScaleReportOutput(t *testing.T) {
	dir := writeScaleFixture(t)
	jsonOut := filepath.Join(dir, "bench-scale.json")
	out, _, err := benchtest.Run(t, NewCommand, "", "bench", "scale", "report", dir, "--json-out", jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"== weir HEAD (abc123), the baseline\nnot measured: building failed",
		"== weir v1", "EMPTY", "1000 PARTITIONS", "> 300", "> 60", "0 (400)",
		"40 of 1000 partitions still without a leader", "1000 partitions: something odd",
		"produce: 2 producers, 2000 records, 0.50 MB/s",
		"INCOMPLETE: not compared",
		"== side by side", "WEIR/KAFKA", "2.00x",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Params  map[string]any `json:"params"`
		Systems []struct {
			Name string `json:"name"`
		} `json:"systems"`
		Comparisons []scaleComparison `json:"comparisons"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Params["partitions"] == nil || len(doc.Systems) != 3 || len(doc.Comparisons) == 0 {
		t.Fatalf("json summary %s", b)
	}
	var again bytes.Buffer
	if err := json.Indent(&again, b, "", "  "); err != nil {
		t.Fatal(err)
	}
}

func TestSummariseProduceDuration(t *testing.T) {
	// Stopped by --duration still measured a rate; a stall did not.
	p := summariseProduce([]harness.Summary{{Records: 10, Bytes: 10, Seconds: 1, Stopped: harness.StopDuration}})
	if !p.Complete {
		t.Error("a run ended by its duration is not complete")
	}
	if p := summariseProduce([]harness.Summary{{Stopped: harness.StopRecords, Seconds: 1}, {Stopped: harness.StopStalled}}); p.Complete {
		t.Error("a stalled producer counted as complete")
	}
	if p := summariseProduce(nil); p.Complete {
		t.Error("no producers counted as complete")
	}
}
