package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// fakeCluster is three brokers: 0 and 1 answer (1 with more shards), 2
// registered no admin_addr, and 3 is down. Broker 0's admin API is the
// one weirctl is pointed at.
func fakeCluster(t *testing.T) (seed, second *fakeBroker) {
	page := testPage()
	page.saved = [][3]float64{{40960, 10, 0.002}, {0, 0, 0}} // 200 µs a read
	seed = newFakeBroker(t, page)
	p := testPage()
	p.shards = [][4]uint64{{1, 0, 1, 0}, {0, 0, 0, 0}, {2, 1, 4, 1}}
	second = newFakeBroker(t, p)
	seed.setBrokers(
		adminBroker{NodeID: 1, KafkaAddr: "127.0.0.1:9093", AdminAddr: second.addr(), IsAlive: true},
		adminBroker{NodeID: 0, KafkaAddr: "127.0.0.1:9092", AdminAddr: seed.addr(), IsAlive: true},
		adminBroker{NodeID: 2, KafkaAddr: "127.0.0.1:9094", IsAlive: true},
		adminBroker{NodeID: 3, KafkaAddr: "127.0.0.1:9095", AdminAddr: "127.0.0.1:1", IsAlive: false},
	)
	return seed, second
}

func TestCoalescerStatsTable(t *testing.T) {
	seed, _ := fakeCluster(t)
	out, _, err := run(t, "", "cluster", "coalescer", "--admin-url", seed.srv.URL, "stats")
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
	out, _, err := run(t, "", "--format", "json", "cluster", "coalescer", "--admin-url", seed.srv.URL, "stats")
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

	out, _, err = run(t, "", "--format", "yaml", "cluster", "coalescer", "--admin-url", seed.srv.URL, "stats")
	if err != nil || !strings.Contains(out, "ready_hits: 30") {
		t.Errorf("yaml: %v\n%s", err, out)
	}
}

func TestCoalescerStatsFailsOnlyWhenNoneAnswered(t *testing.T) {
	seed, second := fakeCluster(t)
	// One broker without coalescer metrics is reported, not fatal.
	p := testPage()
	p.shards = nil
	second.setPage(p)
	out, _, err := run(t, "", "cluster", "coalescer", "--admin-url", seed.srv.URL, "stats")
	if err != nil || !strings.Contains(out, "no fetch read coalescer metrics") {
		t.Fatalf("%v\n%s", err, out)
	}
	seed.setPage(p)
	out, _, err = run(t, "", "cluster", "coalescer", "--admin-url", seed.srv.URL, "stats")
	wantErrContains(t, err, "no broker reported coalescer counters")
	if strings.Contains(out, "INSERTIONS") || !strings.Contains(out, "ERROR") {
		t.Errorf("only the error table is expected:\n%s", out)
	}

	_, _, err = run(t, "", "--timeout", "1s", "cluster", "coalescer", "--admin-url", "127.0.0.1:1", "stats")
	wantErrContains(t, err, "listing brokers at http://127.0.0.1:1")
}

func TestForBroker(t *testing.T) {
	c := &adminClient{base: "https://seed.example:9644"}
	for _, tc := range []struct {
		b    adminBroker
		want string
	}{
		{adminBroker{AdminAddr: "10.0.0.2:9644", KafkaAddr: "10.0.0.2:9092"}, "https://10.0.0.2:9644"},
		{adminBroker{AdminAddr: "0.0.0.0:9645", KafkaAddr: "b1.example:9092"}, "https://b1.example:9645"},
		{adminBroker{AdminAddr: "[::]:9645", KafkaAddr: ":9092"}, "https://seed.example:9645"},
		{adminBroker{AdminAddr: ":9646", KafkaAddr: "[fd00::1]:9092"}, "https://[fd00::1]:9646"},
	} {
		got, err := c.forBroker(tc.b)
		if err != nil || got.base != tc.want {
			t.Errorf("%+v: got %v, %v; want %s", tc.b, got, err, tc.want)
		}
	}
	if _, err := c.forBroker(adminBroker{}); err != errNoAdminAddr {
		t.Errorf("no admin_addr: %v", err)
	}
	if _, err := c.forBroker(adminBroker{AdminAddr: "no-port"}); err == nil {
		t.Error("want an error for an admin_addr without a port")
	}
}
