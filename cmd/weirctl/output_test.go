package main

import (
	"bytes"
	"encoding/json"
	"errors"
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
)

var testID = [16]byte{0: 0xfb, 1: 0xff, 15: 1}

func TestFormatTopicID(t *testing.T) {
	if got := formatTopicID([16]byte{}); got != "" {
		t.Errorf("zero ID: got %q, want empty", got)
	}
	// 22 chars, URL-safe alphabet, no padding: Kafka's Uuid.toString.
	got := formatTopicID(testID)
	if len(got) != 22 || strings.ContainsAny(got, "+/=") {
		t.Errorf("got %q", got)
	}
}

func TestKafkaErrNames(t *testing.T) {
	err := error(kerr.TopicAlreadyExists)
	if got := kafkaErrName(err); got != "TOPIC_ALREADY_EXISTS" {
		t.Errorf("name: %q", got)
	}
	if got := kafkaErrName(errors.Join(errors.New("ctx"), kerr.UnknownTopicOrPartition)); got != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("wrapped name: %q", got)
	}
	if got := statusCell(err, "Topic 'a' already exists."); got != "TOPIC_ALREADY_EXISTS: Topic 'a' already exists." {
		t.Errorf("status with broker message: %q", got)
	}
	if got := statusCell(err, ""); !strings.HasPrefix(got, "TOPIC_ALREADY_EXISTS: ") {
		t.Errorf("status falls back to description: %q", got)
	}
	if got := statusCell(nil, ""); got != "OK" {
		t.Errorf("nil: %q", got)
	}
}

func TestDisplayBytes(t *testing.T) {
	for in, want := range map[string]string{
		"hello world": "hello world",
		"tab\there":   `"tab\there"`,
		"\xff\xfe":    `"\xff\xfe"`,
		"héllo":       "héllo",
	} {
		if got := displayBytes([]byte(in)); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	if displayBytes(nil) != "" || jsonBytes(nil) != nil {
		t.Error("nil should render empty / null")
	}
	if s := jsonBytes([]byte{}); s == nil || *s != "" {
		t.Error("empty must stay distinguishable from nil")
	}
}

func TestTableAlignment(t *testing.T) {
	tb := newTable("NAME", "PARTITIONS")
	tb.row("a", 3)
	tb.row("much-longer-name", []int32{1, 2})
	var buf bytes.Buffer
	if err := tb.write(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %q", buf.String())
	}
	col := strings.Index(lines[0], "PARTITIONS")
	if strings.Index(lines[1], "3") != col || strings.Index(lines[2], "[1 2]") != col {
		t.Errorf("columns not aligned:\n%s", buf.String())
	}
}

func createResponses() kadm.CreateTopicResponses {
	return kadm.CreateTopicResponses{
		"good": {Topic: "good", ID: testID, NumPartitions: 3, ReplicationFactor: 1},
		"dup":  {Topic: "dup", Err: kerr.TopicAlreadyExists, ErrMessage: "Topic 'dup' already exists."},
	}
}

func TestCreateResultsTable(t *testing.T) {
	var buf bytes.Buffer
	err := printCreateResults(&buf, formatTable, []string{"good", "dup"}, createResponses(), false)
	wantErrContains(t, err, "1 of 2 topics failed")
	out := buf.String()
	for _, want := range []string{"TOPIC", "STATUS", "good", "OK", "dup", "TOPIC_ALREADY_EXISTS: Topic 'dup' already exists."} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestCreateResultsJSON(t *testing.T) {
	var buf bytes.Buffer
	err := printCreateResults(&buf, formatJSON, []string{"good", "dup", "lost"}, createResponses(), false)
	wantErrContains(t, err, "2 of 3 topics failed")
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
	if err := printCreateResults(&buf, formatTable, []string{"good"}, resps, true); err != nil {
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
	err := printDeleteResults(&buf, formatJSON, []string{"a", "b"}, resps)
	wantErrContains(t, err, "1 of 2")
	var got []topicResult
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got[0].Error != "" || got[1].Error != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("got %+v", got)
	}
	buf.Reset()
	if err := printDeleteResults(&buf, formatTable, []string{"a"}, resps); err != nil {
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
	if err := printTopicList(&buf, formatJSON, topicDetails()); err != nil {
		t.Fatal(err)
	}
	var got []topicSummary
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "alpha" || got[1].Name != "orders" {
		t.Fatalf("want sorted alpha, orders: %+v", got)
	}
	if got[1].Partitions != 3 || got[1].Replicas != 1 || got[1].ID != formatTopicID(testID) {
		t.Errorf("orders: %+v", got[1])
	}

	buf.Reset()
	if err := printTopicList(&buf, formatTable, topicDetails()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[2], formatTopicID(testID)) {
		t.Errorf("table:\n%s", buf.String())
	}

	buf.Reset()
	err := printTopicList(&buf, formatJSON, kadm.TopicDetails{"x": {Topic: "x", Err: kerr.TopicAuthorizationFailed}})
	wantErrContains(t, err, "TOPIC_AUTHORIZATION_FAILED")
	if strings.TrimSpace(buf.String()) != "[]" {
		t.Errorf("empty list must be [] not null: %q", buf.String())
	}
}

func sampleDescription() *topicDescription {
	v := "1000"
	return &topicDescription{
		Name: "orders",
		ID:   formatTopicID(testID),
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
	if err := printTopicDescription(&buf, formatJSON, sampleDescription()); err != nil {
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
	if err := printTopicDescription(&buf, formatTable, sampleDescription()); err != nil {
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
	p := &recordPrinter{w: &buf, format: formatJSON}
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
	p := &recordPrinter{w: &buf, format: formatTable}
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

func TestBenchSummaryOutput(t *testing.T) {
	lat := []time.Duration{4 * time.Millisecond, 1 * time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
	s := newSummary("produce", "t", 4, 4*bytesPerMB, 0, 2*time.Second, lat)
	s.Stopped = stopRecords
	if s.RecordsPerSec != 2 || s.MBPerSec != 2 || s.P50Ms != 2 || s.MaxMs != 4 {
		t.Errorf("summary math: %+v", s)
	}

	var buf bytes.Buffer
	if err := s.write(&buf, formatJSON); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"records", "bytes", "seconds", "records_per_sec", "mb_per_sec", "p50_ms", "p95_ms", "p99_ms", "max_ms"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON summary lacks %q: %s", k, buf.String())
		}
	}

	buf.Reset()
	if err := s.write(&buf, formatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RECORDS/SEC", "MB/SEC", "P99 MS", "STOPPED"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestSummaryWithoutTime(t *testing.T) {
	s := newSummary("consume", "t", 0, 0, 0, 0, nil)
	if s.RecordsPerSec != 0 || s.MBPerSec != 0 || s.MaxMs != 0 {
		t.Errorf("zero run must not divide by zero: %+v", s)
	}
}

// yamlSample exercises what the JSON to YAML conversion must get right:
// field order, integers staying integers, strings that look like other
// types, null, nesting, empty collections and multi-line text.
type yamlSample struct {
	Zeta     string            `json:"zeta"`
	Count    int64             `json:"count"`
	Ratio    float64           `json:"ratio"`
	Looks    []string          `json:"looks"`
	Missing  *string           `json:"missing"`
	Nested   map[string]int    `json:"nested"`
	Empty    []int             `json:"empty"`
	NoFields map[string]string `json:"no_fields"`
	Text     string            `json:"text"`
	Skipped  string            `json:"skipped,omitempty"`
}

func TestWriteDocumentYAML(t *testing.T) {
	v := yamlSample{
		Zeta: "first", Count: 1798761600, Ratio: 0.5,
		Looks:  []string{"true", "123", "", "null", "a: b", "<html>"},
		Nested: map[string]int{"b": 2, "a": 1}, Empty: []int{}, NoFields: map[string]string{},
		Text: "line one\nline two",
	}
	var buf bytes.Buffer
	if err := writeDocument(&buf, formatYAML, v); err != nil {
		t.Fatal(err)
	}
	want := `zeta: first
count: 1798761600
ratio: 0.5
looks:
  - "true"
  - "123"
  - ""
  - "null"
  - 'a: b'
  - <html>
missing: null
nested:
  a: 1
  b: 2
empty: []
no_fields: {}
text: |-
  line one
  line two
`
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
	if got, want := yamlAsJSON(t, buf.Bytes()), compactJSON(t, []byte(jsonOf(t, v))); got != want {
		t.Errorf("YAML reads back as a different document:\n%s\n%s", got, want)
	}
}

func TestWriteDocumentRejectsTable(t *testing.T) {
	if err := writeDocument(io.Discard, formatTable, 1); err == nil {
		t.Fatal("table is not a document format")
	}
	if err := validateFormat(formatYAML); err != nil {
		t.Fatal(err)
	}
	wantErrContains(t, validateFormat("xml"), "yaml")
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// yamlAsJSON decodes a YAML document and re-encodes it as compact JSON,
// so it can be compared with the JSON output of the same printer.
func yamlAsJSON(t *testing.T, data []byte) string {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return jsonOf(t, v)
}

func compactJSON(t *testing.T, data []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return jsonOf(t, v)
}

// TestPrintersYAMLMatchJSON checks that every one-shot printer prints the
// same document in both formats, errors included.
func TestPrintersYAMLMatchJSON(t *testing.T) {
	lat := []time.Duration{time.Millisecond, 3 * time.Millisecond}
	printers := map[string]func(w io.Writer, format string) error{
		"topic create": func(w io.Writer, f string) error {
			return printCreateResults(w, f, []string{"good", "dup"}, createResponses(), false)
		},
		"topic list":     func(w io.Writer, f string) error { return printTopicList(w, f, topicDetails()) },
		"topic describe": func(w io.Writer, f string) error { return printTopicDescription(w, f, sampleDescription()) },
		"cluster info":   func(w io.Writer, f string) error { return printClusterInfo(w, f, summarizeCluster(testMetadata())) },
		"bench summary": func(w io.Writer, f string) error {
			return newSummary("produce", "t", 2, 2048, 0, time.Second, lat).write(w, f)
		},
	}
	for name, print := range printers {
		var js, ys bytes.Buffer
		jerr, yerr := print(&js, formatJSON), print(&ys, formatYAML)
		if fmt.Sprint(jerr) != fmt.Sprint(yerr) {
			t.Errorf("%s: errors differ: %v / %v", name, jerr, yerr)
		}
		if got, want := yamlAsJSON(t, ys.Bytes()), compactJSON(t, js.Bytes()); got != want {
			t.Errorf("%s: YAML differs from JSON:\n%s\n%s", name, got, want)
		}
	}
}

func TestRecordPrinterYAMLStream(t *testing.T) {
	var buf bytes.Buffer
	p := &recordPrinter{w: &buf, format: formatYAML}
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
		if err := json.Unmarshal([]byte(jsonOf(t, m)), &rec); err != nil {
			t.Fatal(err)
		}
		got = append(got, rec)
	}
	if len(got) != 2 || got[0].Offset != 17 || *got[0].Key != "k1" || got[1].Key != nil || got[1].Timestamp != "2024-05-06T07:08:09.123Z" {
		t.Errorf("stream: %+v", got)
	}
}
