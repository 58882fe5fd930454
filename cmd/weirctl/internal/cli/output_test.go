package cli

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestFormatTopicID(t *testing.T) {
	if got := FormatTopicID([16]byte{}); got != "" {
		t.Errorf("zero ID: got %q, want empty", got)
	}
	// 22 chars, URL-safe alphabet, no padding: Kafka's Uuid.toString.
	got := FormatTopicID([16]byte{0: 0xfb, 1: 0xff, 15: 1})
	if len(got) != 22 || strings.ContainsAny(got, "+/=") {
		t.Errorf("got %q", got)
	}
}

func TestKafkaErrNames(t *testing.T) {
	err := error(kerr.TopicAlreadyExists)
	if got := KafkaErrName(err); got != "TOPIC_ALREADY_EXISTS" {
		t.Errorf("name: %q", got)
	}
	if got := KafkaErrName(errors.Join(errors.New("ctx"), kerr.UnknownTopicOrPartition)); got != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("wrapped name: %q", got)
	}
	if got := StatusCell(err, "Topic 'a' already exists."); got != "TOPIC_ALREADY_EXISTS: Topic 'a' already exists." {
		t.Errorf("status with broker message: %q", got)
	}
	if got := StatusCell(err, ""); !strings.HasPrefix(got, "TOPIC_ALREADY_EXISTS: ") {
		t.Errorf("status falls back to description: %q", got)
	}
	if got := StatusCell(nil, ""); got != "OK" {
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
		if got := DisplayBytes([]byte(in)); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	if DisplayBytes(nil) != "" || JSONBytes(nil) != nil {
		t.Error("nil should render empty / null")
	}
	if s := JSONBytes([]byte{}); s == nil || *s != "" {
		t.Error("empty must stay distinguishable from nil")
	}
}

func TestTableAlignment(t *testing.T) {
	tb := NewTable("NAME", "PARTITIONS")
	tb.Row("a", 3)
	tb.Row("much-longer-name", []int32{1, 2})
	var buf bytes.Buffer
	if err := tb.Write(&buf); err != nil {
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
	if err := WriteDocument(&buf, FormatYAML, v); err != nil {
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
	if got, want := clitest.YAMLAsJSON(t, buf.Bytes()), clitest.CompactJSON(t, []byte(clitest.JSONOf(t, v))); got != want {
		t.Errorf("YAML reads back as a different document:\n%s\n%s", got, want)
	}
}

func TestWriteDocumentRejectsTable(t *testing.T) {
	if err := WriteDocument(io.Discard, FormatTable, 1); err == nil {
		t.Fatal("table is not a document format")
	}
	if err := validateFormat(FormatYAML); err != nil {
		t.Fatal(err)
	}
	clitest.WantErrContains(t, validateFormat("xml"), "yaml")
}
