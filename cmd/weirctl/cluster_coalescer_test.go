package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/admin/admintest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

// fakeCluster is three brokers: 0 and 1 answer (1 with more shards), 2
// registered no admin_addr, and 3 is down. Broker 0's admin API is the
// one weirctl is pointed at.
func fakeCluster(t *testing.T) (seed, second *admintest.FakeBroker) {
	page := admintest.SamplePage()
	page.Saved = [][3]float64{{40960, 10, 0.002}, {0, 0, 0}} // 200 µs a read
	seed = admintest.NewFakeBroker(t, page)
	p := admintest.SamplePage()
	p.Shards = [][4]uint64{{1, 0, 1, 0}, {0, 0, 0, 0}, {2, 1, 4, 1}}
	second = admintest.NewFakeBroker(t, p)
	seed.SetBrokers(
		admin.Broker{NodeID: 1, KafkaAddr: "127.0.0.1:9093", AdminAddr: second.Addr(), IsAlive: true},
		admin.Broker{NodeID: 0, KafkaAddr: "127.0.0.1:9092", AdminAddr: seed.Addr(), IsAlive: true},
		admin.Broker{NodeID: 2, KafkaAddr: "127.0.0.1:9094", IsAlive: true},
		admin.Broker{NodeID: 3, KafkaAddr: "127.0.0.1:9095", AdminAddr: "127.0.0.1:1", IsAlive: false},
	)
	return seed, second
}

func TestCoalescerStatsTable(t *testing.T) {
	seed, _ := fakeCluster(t)
	out, _, err := run(t, "", "cluster", "coalescer", "--admin-url", seed.Server.URL, "stats")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("\n%s", out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	want := []string{
		"BROKER  SHARD  INSERTIONS  REINSERTIONS  READY-HITS  INFLIGHT-HITS  HIT-RATIO  SHARED-BYTES  US/READ  SAVED-S",
		"0       0      10          2             30          8              0.760      40960         200.0    0.008",
		"0       1      0           0             0           0              0.000      0             0.0      0.000",
		"0       total  10          2             30          8              0.760      40960         200.0    0.008",
		"1       0      1           0             1           0              0.500      0             0.0      0.000",
		"1       1      0           0             0           0              0.000      0             0.0      0.000",
		"1       2      2           1             4           1              0.625      0             0.0      0.000",
		"1       total  3           1             5           1              0.600      0             0.0      0.000",
		"all     total  13          3             35          9              0.733      40960         200.0    0.009",
		"",
		"BROKER  ADMIN-ADDR   ERROR",
		"2                    unreachable: the broker registered no admin_addr",
		"3       127.0.0.1:1  not alive (not asked)",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i := range want {
		if strings.TrimRight(lines[i], " ") != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], want[i])
		}
	}
}

func TestCoalescerStatsJSON(t *testing.T) {
	seed, _ := fakeCluster(t)
	out, _, err := run(t, "", "--format", "json", "cluster", "coalescer", "--admin-url", seed.Server.URL, "stats")
	if err != nil {
		t.Fatal(err)
	}
	var doc coalescerStats
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Answered != 2 || len(doc.Brokers) != 4 || doc.Total.ReadyHits != 35 {
		t.Fatalf("document: %+v", doc)
	}
	b1 := doc.Brokers[1]
	if b1.NodeID != 1 || len(b1.Shards) != 3 || b1.Shards[2].Shard != "2" || b1.Shards[2].InflightHits != 1 || b1.Total == nil || b1.Total.HitRatio != 0.6 {
		t.Errorf("broker 1: %+v", b1)
	}
	if doc.Brokers[2].Error == "" || doc.Brokers[2].Total != nil || doc.Brokers[3].Error == "" {
		t.Errorf("failed brokers: %+v %+v", doc.Brokers[2], doc.Brokers[3])
	}
	// The keys scripts read.
	for _, key := range []string{`"node_id"`, `"shards"`, `"insertions"`, `"reinsertions"`, `"ready_hits"`, `"inflight_hits"`, `"hit_ratio"`, `"shared_bytes"`, `"reads"`, `"read_seconds"`, `"seconds_per_read"`, `"saved_seconds"`, `"answered"`, `"error"`} {
		if !strings.Contains(out, key) {
			t.Errorf("JSON lacks %s", key)
		}
	}

	out, _, err = run(t, "", "--format", "yaml", "cluster", "coalescer", "--admin-url", seed.Server.URL, "stats")
	if err != nil || !strings.Contains(out, "ready_hits: 30") {
		t.Errorf("yaml: %v\n%s", err, out)
	}
}

func TestCoalescerStatsFailsOnlyWhenNoneAnswered(t *testing.T) {
	seed, second := fakeCluster(t)
	// One broker without coalescer metrics is reported, not fatal.
	p := admintest.SamplePage()
	p.Shards = nil
	second.SetPage(p)
	out, _, err := run(t, "", "cluster", "coalescer", "--admin-url", seed.Server.URL, "stats")
	if err != nil || !strings.Contains(out, "no fetch read coalescer metrics") {
		t.Fatalf("%v\n%s", err, out)
	}
	seed.SetPage(p)
	out, _, err = run(t, "", "cluster", "coalescer", "--admin-url", seed.Server.URL, "stats")
	clitest.WantErrContains(t, err, "no broker reported coalescer counters")
	if strings.Contains(out, "INSERTIONS") || !strings.Contains(out, "ERROR") {
		t.Errorf("only the error table is expected:\n%s", out)
	}

	_, _, err = run(t, "", "--timeout", "1s", "cluster", "coalescer", "--admin-url", "127.0.0.1:1", "stats")
	clitest.WantErrContains(t, err, "listing brokers at http://127.0.0.1:1")
}
