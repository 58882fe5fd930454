package integration

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// scrapeTimeout bounds waiting for scraped metrics to settle: leadership
// and ISR reports reach the controller within seconds, and a stopped
// broker stops being live after the broker session timeout (9 s).
const scrapeTimeout = 40 * time.Second

// scrape is one /metrics page: series ("name" or `name{a="x",b="y"}`,
// labels in the order the exposition lists them) -> value.
type scrape map[string]float64

var seriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$`)

// scrapeMetrics GETs http://<admin>/metrics and parses the text exposition
// (enough of it for weir's series: no timestamps, no escaped quotes in the
// label values weir uses).
func scrapeMetrics(t *testing.T, b *Broker) scrape {
	t.Helper()
	code, body := httpGet(t, "http://"+b.AdminAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics on node %d: %d, want 200", b.NodeID, code)
	}
	out := scrape{}
	for _, line := range strings.Split(body, "\n") {
		m := seriesLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("node %d /metrics: %q: %v", b.NodeID, line, err)
		}
		out[m[1]+m[2]] = v
	}
	return out
}

// value is a series' value and whether the page has it.
func (s scrape) value(series string) (float64, bool) {
	v, ok := s[series]
	return v, ok
}

// sumOver scrapes every broker in bs and adds up series, counting a
// broker without it as 0.
func sumOver(t *testing.T, bs []*Broker, series string) float64 {
	t.Helper()
	var sum float64
	for _, b := range bs {
		v, _ := scrapeMetrics(t, b).value(series)
		sum += v
	}
	return sum
}

// clusterPartitions counts, from b's Metadata of topics, the partitions
// and the replicas; holding counts the partitions with a replica on node.
func clusterPartitions(t *testing.T, b *Broker, node int32, topics ...string) (partitions, replicas, holding int, err error) {
	t.Helper()
	md, err := askMetadata(t, b, topics...)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, mt := range md.Topics {
		if mt.ErrorCode != 0 {
			return 0, 0, 0, fmt.Errorf("Metadata(%s) from node %d: error %d (%s)", derefStr(mt.Topic), b.NodeID, mt.ErrorCode, errName(mt.ErrorCode))
		}
		for _, p := range mt.Partitions {
			partitions++
			replicas += len(p.Replicas)
			if slices.Contains(p.Replicas, node) {
				holding++
			}
		}
	}
	return partitions, replicas, holding, nil
}

// TestMetricsCluster: the per-topic traffic counters, the partition
// gauges and the cluster config version on three real brokers' /metrics,
// before and after one of them stops.
func TestMetricsCluster(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3)
	const (
		topic        = "metrics-repl"
		partitions   = 6
		perPartition = 50
	)
	createReplicatedTopic(t, bs[0], topic, partitions, 3, nil)
	waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, leaderTimeout, nil)

	cl, err := kgo.NewClient(append(replClientOpts(bs), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	produceAll(t, cl, seqRecords(topic, partitions, perPartition), 30*time.Second)
	consumeN(t, bs[0], partitions*perPartition, 30*time.Second, []string{topic})

	// Traffic is counted on the leaders before they answer, so it is all
	// there once the produce and the consume returned.
	label := `{topic="` + topic + `"}`
	recordsIn := sumOver(t, bs, "weir_kafka_topic_records_in_total"+label)
	bytesIn := sumOver(t, bs, "weir_kafka_topic_bytes_in_total"+label)
	bytesOut := sumOver(t, bs, "weir_kafka_topic_bytes_out_total"+label)
	t.Logf("%s: %v records, %v bytes in, %v bytes out over the brokers", topic, recordsIn, bytesIn, bytesOut)
	if recordsIn != partitions*perPartition {
		t.Errorf("weir_kafka_topic_records_in_total%s summed over the brokers: %v, want %d", label, recordsIn, partitions*perPartition)
	}
	if bytesIn <= 0 {
		t.Errorf("weir_kafka_topic_bytes_in_total%s summed over the brokers: %v, want > 0", label, bytesIn)
	}
	// Every batch produced was fetched whole at least once.
	if bytesOut < bytesIn {
		t.Errorf("weir_kafka_topic_bytes_out_total%s summed over the brokers: %v, want at least the %v bytes in", label, bytesOut, bytesIn)
	}

	// Every family docs/metrics.md lists is served by some broker by now,
	// so a renamed metric is noticed.
	var pages strings.Builder
	for _, b := range bs {
		_, body := httpGet(t, "http://"+b.AdminAddr+"/metrics")
		pages.WriteString(body)
	}
	for _, family := range []string{
		"weir_kafka_connections", "weir_kafka_requests_total", "weir_kafka_request_duration_seconds",
		"weir_kafka_request_bytes_total", "weir_kafka_response_bytes_total",
		"weir_kafka_topic_bytes_in_total", "weir_kafka_topic_bytes_out_total", "weir_kafka_topic_records_in_total",
		"weir_partitions", "weir_partition_leaders", "weir_under_replicated_partitions", "weir_offline_partitions",
		"weir_cluster_config_version", "weir_group_rebalances_total",
		"weir_raft_applied_index", "weir_raft_commit_index", "weir_raft_last_index", "weir_raft_is_leader", "weir_raft_leader_changes_total",
		"weir_raft_commit_latency_seconds", "weir_raft_mux_connections_total",
		"weir_raft_rpc_calls_total", "weir_raft_rpc_call_duration_seconds", "weir_raft_rpc_handled_total",
		"weir_raft_groups", "weir_raft_transport_frames_total", "weir_raft_transport_bytes_total",
		"weir_raft_transport_heartbeat_frames_total", "weir_raft_transport_heartbeats_total",
		"weir_raft_transport_heartbeat_batch_groups", "weir_raft_transport_connections", "weir_raft_transport_commit_notices_total",
		"weir_raft_log_fsyncs_total", "weir_raft_log_batch_records", "weir_raft_log_batch_groups",
		"weir_raft_log_sync_seconds", "weir_raft_log_bytes_written_total", "weir_raft_log_segments", "weir_raft_log_groups",
		"weir_log_reads_total", "weir_log_read_bytes_total", "weir_fetch_partition_reads_total", "weir_fetch_bytes_total",
		"weir_log_cleaner_read_bytes_total", "weir_log_cleaner_written_bytes_total", "weir_log_cleaner_removed_records_total",
		"weir_log_cleaner_removed_tombstones_total", "weir_log_cleaner_runs_total", "weir_log_cleaner_errors_total",
		"weir_log_cleaner_dirty_ratio", "weir_log_cleaner_max_compaction_delay_seconds", "weir_log_cleaner_uncleanable_partitions",
		"weir_license_expiry_seconds", "weir_license_valid", "weir_enterprise_license_violation",
		"weir_request_memory_pool_bytes", "weir_request_memory_in_use_bytes", "weir_request_memory_peak_bytes",
		"weir_request_memory_waits_total", "weir_request_memory_wait_seconds_total",
		"weir_fetch_memory_budget_bytes", "weir_fetch_memory_in_use_bytes", "weir_fetch_memory_peak_bytes",
		"weir_fetch_memory_waits_total", "weir_fetch_memory_wait_seconds_total",
		"weir_fetch_memory_trimmed_reads_total", "weir_fetch_memory_overdraft_bytes_total",
		"weir_fetch_read_buffers_held_bytes", "weir_fetch_read_coalescer_retained_bytes",
		"weir_fetch_read_coalescer_range_hits_total", "weir_fetch_read_coalescer_shared_bytes_total",
		"weir_fetch_read_coalescer_reads_total", "weir_fetch_read_coalescer_read_bytes_total",
		"weir_fetch_read_coalescer_read_seconds_total",
		"weir_kafka_fetch_sessions", "weir_kafka_fetch_session_partitions", "weir_kafka_fetch_session_evictions_total",
	} {
		if !strings.Contains(pages.String(), "# TYPE "+family+" ") {
			t.Errorf("no broker's /metrics has the %s family", family)
		}
	}

	// Every partition has exactly one leader, every replica runs, and
	// nothing is under-replicated or offline.
	total, replicas, _, err := clusterPartitions(t, bs[0], -1, topic, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, scrapeTimeout, "partition gauges of a healthy cluster", func() error {
		got := map[string]float64{}
		for _, s := range []string{"weir_partition_leaders", `weir_partitions{role="leader"}`, `weir_partitions{role="follower"}`,
			"weir_under_replicated_partitions", "weir_offline_partitions"} {
			got[s] = sumOver(t, bs, s)
		}
		want := map[string]float64{
			"weir_partition_leaders":           float64(total),
			`weir_partitions{role="leader"}`:   float64(total),
			`weir_partitions{role="follower"}`: float64(replicas - total),
			"weir_under_replicated_partitions": 0,
			"weir_offline_partitions":          0,
		}
		for s, w := range want {
			if got[s] != w {
				return fmt.Errorf("summed over the brokers %v, want %v (%d partitions, %d replicas)", got, want, total, replicas)
			}
		}
		return nil
	})

	// One batch of cluster property changes moves every broker's config
	// version by one.
	v0, ok := scrapeMetrics(t, bs[0]).value("weir_cluster_config_version")
	if !ok {
		t.Fatal("node 0 reports no weir_cluster_config_version")
	}
	adm := kadm.NewClient(directClient(t, bs[1]))
	resp, err := adm.AlterBrokerConfigs(ctxTimeout(t, requestTimeout), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("7200000")}})
	if err != nil || len(resp) != 1 || resp[0].Err != nil {
		t.Fatalf("AlterBrokerConfigs log.retention.ms: %v %+v", err, resp)
	}
	pollUntil(t, scrapeTimeout, "every broker's config version one up", func() error {
		for _, b := range bs {
			if v, ok := scrapeMetrics(t, b).value("weir_cluster_config_version"); !ok || v != v0+1 {
				return fmt.Errorf("node %d: weir_cluster_config_version %v (reported: %v), want %v", b.NodeID, v, ok, v0+1)
			}
		}
		return nil
	})

	// A follower stops (not the controller, so the controller's view,
	// which the gauges read, stays where it was): every partition of the
	// RF 3 topic has a replica on it and keeps a leader, so each is
	// under-replicated on its leader.
	controller, err := clusterView(t, bs)
	if err != nil {
		t.Fatal(err)
	}
	victim := without(bs, controller)[0]
	_, _, holding, err := clusterPartitions(t, bs[0], int32(victim.NodeID), topic, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopping node %d (controller: node %d), which holds replicas of %d partitions", victim.NodeID, controller, holding)
	victim.Stop(t)
	live := without(bs, int32(victim.NodeID))
	var urp float64
	pollUntil(t, scrapeTimeout, fmt.Sprintf("under-replicated partitions with node %d stopped", victim.NodeID), func() error {
		urp = sumOver(t, live, "weir_under_replicated_partitions")
		// RF 1 and 2 partitions of __consumer_offsets on the victim lose
		// their leader or their quorum instead; none can be more.
		if urp < partitions || urp > float64(holding) {
			return fmt.Errorf("weir_under_replicated_partitions summed over nodes %d and %d: %v, want %d to %d",
				live[0].NodeID, live[1].NodeID, urp, partitions, holding)
		}
		return nil
	})
	t.Logf("%v partitions under-replicated on nodes %d and %d", urp, live[0].NodeID, live[1].NodeID)
}
