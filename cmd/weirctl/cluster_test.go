package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func testMetadata() kadm.Metadata {
	rack := "a"
	return kadm.Metadata{
		Cluster: "c1", Controller: 1,
		Brokers: kadm.BrokerDetails{{NodeID: 2, Host: "h2", Port: 9093}, {NodeID: 1, Host: "h1", Port: 9092, Rack: &rack}},
		Topics: kadm.TopicDetails{
			"t": {Topic: "t", Partitions: kadm.PartitionDetails{
				0: {Topic: "t", Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
				1: {Topic: "t", Partition: 1, Leader: 2, Replicas: []int32{2, 3}, ISR: []int32{2}},
				2: {Topic: "t", Partition: 2, Leader: -1, Replicas: []int32{3}, ISR: []int32{}},
			}},
		},
	}
}

func TestSummarizeCluster(t *testing.T) {
	s := summarizeCluster(testMetadata())
	if s.Healthy || s.Topics != 1 || s.Partitions != 3 {
		t.Fatalf("summary: %+v", s)
	}
	if len(s.Brokers) != 2 || s.Brokers[0].ID != 1 || s.Brokers[0].Leaders != 1 || s.Brokers[0].Replicas != 1 || s.Brokers[1].Replicas != 2 || s.Brokers[0].Rack != "a" {
		t.Fatalf("brokers: %+v", s.Brokers)
	}
	if len(s.Leaderless) != 1 || s.Leaderless[0] != "t/2" || len(s.UnderReplicated) != 2 || len(s.DownNodes) != 1 || s.DownNodes[0] != 3 {
		t.Fatalf("problems: leaderless %v under-replicated %v down %v", s.Leaderless, s.UnderReplicated, s.DownNodes)
	}

	healthy := summarizeCluster(kadm.Metadata{Cluster: "c", Controller: 0, Brokers: kadm.BrokerDetails{kgo.BrokerMetadata{NodeID: 0}}})
	if !healthy.Healthy || len(healthy.Problems) != 0 {
		t.Fatalf("empty single-node cluster: %+v", healthy)
	}
}

func TestPrintCluster(t *testing.T) {
	s := summarizeCluster(testMetadata())
	var buf bytes.Buffer
	if err := printClusterInfo(&buf, cli.FormatTable, s); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "1*") || !strings.Contains(out, "CONTROLLER  1") || !strings.Contains(out, "RACK") {
		t.Fatalf("info table:\n%s", out)
	}
	buf.Reset()
	if err := printClusterHealth(&buf, cli.FormatJSON, s); err != nil {
		t.Fatal(err)
	}
	var back clusterSummary
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Healthy || len(back.Leaderless) != 1 {
		t.Fatalf("health json: %v %+v", err, back)
	}
}

// TestPrintClusterInfoRacks: the table has a RACK column with "-" for a
// broker without a rack; the documents carry "rack" only for brokers that
// have one, next to the fields they always had.
func TestPrintClusterInfoRacks(t *testing.T) {
	s := summarizeCluster(testMetadata())
	var buf bytes.Buffer
	if err := printClusterInfo(&buf, cli.FormatTable, s); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	var header []string
	for _, line := range strings.Split(buf.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == "ID" {
			header = f
		} else if header != nil && len(f) > 0 {
			rows[f[0]] = f
		}
	}
	if strings.Join(header, " ") != "ID HOST PORT RACK LEADERS REPLICAS" {
		t.Fatalf("header %q in:\n%s", header, buf.String())
	}
	if r := rows["1*"]; len(r) != 6 || r[3] != "a" {
		t.Fatalf("broker 1 row %q in:\n%s", r, buf.String())
	}
	if r := rows["2"]; len(r) != 6 || r[3] != "-" {
		t.Fatalf("broker 2 row %q in:\n%s", r, buf.String())
	}

	buf.Reset()
	if err := printClusterInfo(&buf, cli.FormatJSON, s); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Brokers []map[string]any `json:"brokers"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || len(doc.Brokers) != 2 {
		t.Fatalf("info json: %v\n%s", err, buf.String())
	}
	for _, k := range []string{"id", "host", "port", "leaders", "replicas"} {
		for _, b := range doc.Brokers {
			if _, ok := b[k]; !ok {
				t.Fatalf("broker %v lacks %q", b, k)
			}
		}
	}
	if doc.Brokers[0]["rack"] != "a" {
		t.Fatalf("broker 1 rack: %v", doc.Brokers[0])
	}
	if _, ok := doc.Brokers[1]["rack"]; ok {
		t.Fatalf("broker 2 without a rack has one in json: %v", doc.Brokers[1])
	}

	buf.Reset()
	if err := printClusterInfo(&buf, cli.FormatYAML, s); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "rack: a") || strings.Count(out, "rack:") != 1 {
		t.Fatalf("info yaml:\n%s", out)
	}
}
