package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.yaml.in/yaml/v3"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

var testID = [16]byte{0: 0xfb, 1: 0xff, 15: 1}

func createResponses() kadm.CreateTopicResponses {
	return kadm.CreateTopicResponses{
		"good": {Topic: "good", ID: testID, NumPartitions: 3, ReplicationFactor: 1},
		"dup":  {Topic: "dup", Err: kerr.TopicAlreadyExists, ErrMessage: "Topic 'dup' already exists."},
	}
}

func TestCreateResultsTable(t *testing.T) {
	var buf bytes.Buffer
	err := printCreateResults(&buf, cli.FormatTable, []string{"good", "dup"}, createResponses(), false)
	clitest.WantErrContains(t, err, "1 of 2 topics failed")
	out := buf.String()
	for _, want := range []string{"TOPIC", "STATUS", "good", "OK", "dup", "TOPIC_ALREADY_EXISTS: Topic 'dup' already exists."} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestCreateResultsJSON(t *testing.T) {
	var buf bytes.Buffer
	err := printCreateResults(&buf, cli.FormatJSON, []string{"good", "dup", "lost"}, createResponses(), false)
	clitest.WantErrContains(t, err, "2 of 3 topics failed")
	var got []topicResult
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(got) != 3 {
		t.Fatalf("got %d results", len(got))
	}
	if got[0].Topic != "good" || got[0].Partitions != 3 || got[0].Replicas != 1 || got[0].ID == "" || got[0].Error != "" {
		t.Errorf("good: %+v", got[0])
	}
	if got[1].Error != "TOPIC_ALREADY_EXISTS" || got[1].ErrorMessage == "" {
		t.Errorf("dup: %+v", got[1])
	}
	if got[2].Error != "MISSING_RESPONSE" {
		t.Errorf("lost: %+v", got[2])
	}
}

func TestCreateDryRunTable(t *testing.T) {
	var buf bytes.Buffer
	resps := kadm.CreateTopicResponses{"good": {Topic: "good", NumPartitions: 1}}
	if err := printCreateResults(&buf, cli.FormatTable, []string{"good"}, resps, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "dry run") {
		t.Errorf("dry run not visible:\n%s", buf.String())
	}
}

func TestDeleteResults(t *testing.T) {
	resps := kadm.DeleteTopicResponses{
		"a": {Topic: "a"},
		"b": {Topic: "b", Err: kerr.UnknownTopicOrPartition},
	}
	var buf bytes.Buffer
	err := printDeleteResults(&buf, cli.FormatJSON, []string{"a", "b"}, resps)
	clitest.WantErrContains(t, err, "1 of 2")
	var got []topicResult
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got[0].Error != "" || got[1].Error != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("got %+v", got)
	}
	buf.Reset()
	if err := printDeleteResults(&buf, cli.FormatTable, []string{"a"}, resps); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "a") || !strings.Contains(buf.String(), "OK") {
		t.Errorf("table:\n%s", buf.String())
	}
}

func topicDetails() kadm.TopicDetails {
	parts := kadm.PartitionDetails{}
	for p := range int32(3) {
		parts[p] = kadm.PartitionDetail{Topic: "orders", Partition: p, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}
	}
	return kadm.TopicDetails{
		"orders": {Topic: "orders", ID: testID, Partitions: parts},
		"alpha":  {Topic: "alpha", Partitions: kadm.PartitionDetails{0: {Partition: 0, Replicas: []int32{1}}}},
	}
}

func TestTopicList(t *testing.T) {
	var buf bytes.Buffer
	if err := printTopicList(&buf, cli.FormatJSON, topicDetails()); err != nil {
		t.Fatal(err)
	}
	var got []topicSummary
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "alpha" || got[1].Name != "orders" {
		t.Fatalf("want sorted alpha, orders: %+v", got)
	}
	if got[1].Partitions != 3 || got[1].Replicas != 1 || got[1].ID != cli.FormatTopicID(testID) {
		t.Errorf("orders: %+v", got[1])
	}

	buf.Reset()
	if err := printTopicList(&buf, cli.FormatTable, topicDetails()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[2], cli.FormatTopicID(testID)) {
		t.Errorf("table:\n%s", buf.String())
	}

	buf.Reset()
	err := printTopicList(&buf, cli.FormatJSON, kadm.TopicDetails{"x": {Topic: "x", Err: kerr.TopicAuthorizationFailed}})
	clitest.WantErrContains(t, err, "TOPIC_AUTHORIZATION_FAILED")
	if strings.TrimSpace(buf.String()) != "[]" {
		t.Errorf("empty list must be [] not null: %q", buf.String())
	}
}

func sampleDescription() *topicDescription {
	v := "1000"
	return &topicDescription{
		Name: "orders",
		ID:   cli.FormatTopicID(testID),
		Partitions: []partitionInfo{
			{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, LogStartOffset: 0, HighWatermark: 42},
			{Partition: 1, Leader: -1, Replicas: []int32{}, ISR: []int32{}, LogStartOffset: -1, HighWatermark: -1, Error: "LEADER_NOT_AVAILABLE"},
		},
		Configs: []configInfo{
			{Name: "retention.ms", Value: &v, Source: configSourceName(kmsg.ConfigSourceDynamicTopicConfig)},
			{Name: "secret", Sensitive: true, Source: "default"},
		},
	}
}

func TestTopicDescriptionJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := printTopicDescription(&buf, cli.FormatJSON, sampleDescription()); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	parts := got["partitions"].([]any)
	p0 := parts[0].(map[string]any)
	if p0["high_watermark"].(float64) != 42 || p0["log_start_offset"].(float64) != 0 || p0["leader"].(float64) != 1 {
		t.Errorf("partition 0: %v", p0)
	}
	cfg := got["configs"].([]any)[0].(map[string]any)
	if cfg["name"] != "retention.ms" || cfg["value"] != "1000" || cfg["source"] != "topic" {
		t.Errorf("config: %v", cfg)
	}
}

func TestTopicDescriptionTable(t *testing.T) {
	var buf bytes.Buffer
	if err := printTopicDescription(&buf, cli.FormatTable, sampleDescription()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"NAME", "orders", "HIGH-WATERMARK", "42", "LEADER_NOT_AVAILABLE", "retention.ms", "1000", "topic", "<sensitive>"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func sampleRecord() *kgo.Record {
	return &kgo.Record{
		Topic: "orders", Partition: 2, Offset: 17,
		Key: []byte("k1"), Value: []byte("hello"),
		Timestamp: time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC),
	}
}

func TestRecordPrinterJSON(t *testing.T) {
	var buf bytes.Buffer
	p := &recordPrinter{w: &buf, format: cli.FormatJSON}
	r := sampleRecord()
	if err := p.print(r); err != nil {
		t.Fatal(err)
	}
	r2 := sampleRecord()
	r2.Key = nil
	if err := p.print(r2); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one JSON object per line:\n%s", buf.String())
	}
	var got consumedRecord
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Partition != 2 || got.Offset != 17 || *got.Key != "k1" || *got.Value != "hello" || got.Timestamp != "2024-05-06T07:08:09.123Z" {
		t.Errorf("got %+v", got)
	}
	if !strings.Contains(lines[1], `"key":null`) {
		t.Errorf("nil key must be null: %s", lines[1])
	}
}

func TestRecordPrinterTable(t *testing.T) {
	var buf bytes.Buffer
	p := &recordPrinter{w: &buf, format: cli.FormatTable}
	for range 2 {
		if err := p.print(sampleRecord()); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "PARTITION") {
		t.Fatalf("want header once then rows:\n%s", buf.String())
	}
	if strings.Index(lines[0], "VALUE") != strings.Index(lines[1], "hello") {
		t.Errorf("value column misaligned:\n%s", buf.String())
	}
}

// TestPrintersYAMLMatchJSON checks that every one-shot printer prints the
// same document in both formats, errors included.
func TestPrintersYAMLMatchJSON(t *testing.T) {
	printers := map[string]func(w io.Writer, format string) error{
		"topic create": func(w io.Writer, f string) error {
			return printCreateResults(w, f, []string{"good", "dup"}, createResponses(), false)
		},
		"topic list":     func(w io.Writer, f string) error { return printTopicList(w, f, topicDetails()) },
		"topic describe": func(w io.Writer, f string) error { return printTopicDescription(w, f, sampleDescription()) },
		"cluster info":   func(w io.Writer, f string) error { return printClusterInfo(w, f, summarizeCluster(testMetadata())) },
	}
	for name, print := range printers {
		var js, ys bytes.Buffer
		jerr, yerr := print(&js, cli.FormatJSON), print(&ys, cli.FormatYAML)
		if fmt.Sprint(jerr) != fmt.Sprint(yerr) {
			t.Errorf("%s: errors differ: %v / %v", name, jerr, yerr)
		}
		if got, want := clitest.YAMLAsJSON(t, ys.Bytes()), clitest.CompactJSON(t, js.Bytes()); got != want {
			t.Errorf("%s: YAML differs from JSON:\n%s\n%s", name, got, want)
		}
	}
}

func TestRecordPrinterYAMLStream(t *testing.T) {
	var buf bytes.Buffer
	p := &recordPrinter{w: &buf, format: cli.FormatYAML}
	r2 := sampleRecord()
	r2.Key = nil
	for _, r := range []*kgo.Record{sampleRecord(), r2} {
		if err := p.print(r); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(buf.String(), "---\ntopic: orders\n") {
		t.Errorf("each record opens a document:\n%s", buf.String())
	}
	dec := yaml.NewDecoder(&buf)
	var got []consumedRecord
	for {
		var m map[string]any
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		var rec consumedRecord
		if err := json.Unmarshal([]byte(clitest.JSONOf(t, m)), &rec); err != nil {
			t.Fatal(err)
		}
		got = append(got, rec)
	}
	if len(got) != 2 || got[0].Offset != 17 || *got[0].Key != "k1" || got[1].Key != nil || got[1].Timestamp != "2024-05-06T07:08:09.123Z" {
		t.Errorf("stream: %+v", got)
	}
}
