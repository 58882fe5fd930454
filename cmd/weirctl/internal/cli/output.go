package cli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The values of --format.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

// OutputFormats lists the --format values for shell completion; a function
// rather than a package variable so nothing can modify the list.
func OutputFormats() []string { return []string{FormatTable, FormatJSON, FormatYAML} }

func validateFormat(f string) error {
	switch f {
	case FormatTable, FormatJSON, FormatYAML:
		return nil
	}
	return fmt.Errorf("--format must be %s, %s or %s, got %q", FormatTable, FormatJSON, FormatYAML, f)
}

// WriteDocument prints v as one JSON or YAML document. Every one-shot
// command goes through it, so the two formats cannot drift apart: the YAML
// is derived from the JSON encoding, which makes JSON tags the YAML keys.
func WriteDocument(w io.Writer, format string, v any) error {
	switch format {
	case FormatJSON:
		return WriteJSON(w, v)
	case FormatYAML:
		return writeYAML(w, v)
	}
	return fmt.Errorf("format %q is not a document format", format)
}

// WriteStreamDocument prints one item of a stream (produce and consume):
// a JSON line, or a YAML document opened by "---" so that the output is a
// valid multi-document YAML stream at every moment.
func WriteStreamDocument(w io.Writer, format string, v any) error {
	switch format {
	case FormatJSON:
		return writeJSONLine(w, v)
	case FormatYAML:
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		return writeYAML(w, v)
	}
	return fmt.Errorf("format %q is not a document format", format)
}

// WriteJSON prints one indented document. Indentation costs little and keeps
// the output readable when someone pipes it to a pager instead of jq.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine prints one compact object per line, the shape streaming
// commands need so each record can be parsed as soon as it arrives.
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// Table collects rows and aligns them on flush; headers are upper-case as in
// kafka-topics.sh and rpk, which is what operators' eyes are trained on.
type Table struct {
	headers []string
	rows    [][]string
}

// NewTable starts a table; without headers, it has rows only.
func NewTable(headers ...string) *Table { return &Table{headers: headers} }

// Row adds a row, each cell rendered by CellString.
func (t *Table) Row(cells ...any) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = CellString(c)
	}
	t.rows = append(t.rows, r)
}

// Write prints the table aligned in columns two spaces apart.
func (t *Table) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(t.headers) > 0 {
		fmt.Fprintln(tw, strings.Join(t.headers, "\t"))
	}
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// CellString renders a value for a table cell: []int32 as [1 2 3],
// float64 with two decimals.
func CellString(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []int32:
		parts := make([]string, len(v))
		for i, n := range v {
			parts[i] = strconv.Itoa(int(n))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case float64:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return fmt.Sprint(v)
	}
}

// KafkaErrName returns the protocol name of a Kafka error (for example
// TOPIC_ALREADY_EXISTS) because that is what people search for and what
// broker logs print; other errors are returned verbatim.
func KafkaErrName(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// KafkaErrDetail prefers the broker's own message, which usually names the
// offending value, and falls back to the generic description of the code.
func KafkaErrDetail(err error, brokerMsg string) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	isKafka := errors.As(err, &ke)
	if brokerMsg != "" {
		// Some brokers repeat the code's name inside the message; it is
		// already printed once, so drop the echo.
		if isKafka {
			brokerMsg = strings.TrimPrefix(brokerMsg, ke.Message+": ")
		}
		return brokerMsg
	}
	if isKafka {
		return ke.Description
	}
	return ""
}

// StatusCell renders an outcome for a table row: OK, or NAME: detail.
func StatusCell(err error, brokerMsg string) string {
	if err == nil {
		return "OK"
	}
	name := KafkaErrName(err)
	if d := KafkaErrDetail(err, brokerMsg); d != "" && d != name {
		return name + ": " + d
	}
	return name
}

// FormatTopicID renders a topic ID like Kafka's Uuid.toString (URL-safe
// base64 without padding) so IDs can be matched against broker logs and
// kafka-topics.sh output; the all-zero ID means the broker sent none.
func FormatTopicID(id [16]byte) string {
	if id == [16]byte{} {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// DisplayBytes makes keys and values safe for a terminal: printable UTF-8 is
// shown as-is, anything else is Go-quoted so control bytes cannot garble
// the table or the user's terminal.
func DisplayBytes(b []byte) string {
	if b == nil {
		return ""
	}
	s := string(b)
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}

// JSONBytes maps nil to JSON null so scripts can tell "no key" from "empty
// key", which Kafka distinguishes.
func JSONBytes(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// YesNo renders a flag in a table.
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
