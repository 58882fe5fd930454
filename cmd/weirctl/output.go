package main

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

const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// outputFormats lists the --format values for shell completion; a function
// rather than a package variable so nothing can modify the list.
func outputFormats() []string { return []string{formatTable, formatJSON, formatYAML} }

func validateFormat(f string) error {
	switch f {
	case formatTable, formatJSON, formatYAML:
		return nil
	}
	return fmt.Errorf("--format must be %s, %s or %s, got %q", formatTable, formatJSON, formatYAML, f)
}

// writeDocument prints v as one JSON or YAML document. Every one-shot
// command goes through it, so the two formats cannot drift apart: the YAML
// is derived from the JSON encoding, which makes JSON tags the YAML keys.
func writeDocument(w io.Writer, format string, v any) error {
	switch format {
	case formatJSON:
		return writeJSON(w, v)
	case formatYAML:
		return writeYAML(w, v)
	}
	return fmt.Errorf("format %q is not a document format", format)
}

// writeStreamDocument prints one item of a stream (produce and consume):
// a JSON line, or a YAML document opened by "---" so that the output is a
// valid multi-document YAML stream at every moment.
func writeStreamDocument(w io.Writer, format string, v any) error {
	switch format {
	case formatJSON:
		return writeJSONLine(w, v)
	case formatYAML:
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		return writeYAML(w, v)
	}
	return fmt.Errorf("format %q is not a document format", format)
}

// writeJSON prints one indented document. Indentation costs little and keeps
// the output readable when someone pipes it to a pager instead of jq.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine prints one compact object per line, the shape streaming
// commands need so each record can be parsed as soon as it arrives.
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// table collects rows and aligns them on flush; headers are upper-case as in
// kafka-topics.sh and rpk, which is what operators' eyes are trained on.
type table struct {
	headers []string
	rows    [][]string
}

func newTable(headers ...string) *table { return &table{headers: headers} }

func (t *table) row(cells ...any) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = cellString(c)
	}
	t.rows = append(t.rows, r)
}

func (t *table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(t.headers) > 0 {
		fmt.Fprintln(tw, strings.Join(t.headers, "\t"))
	}
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func cellString(c any) string {
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

// kafkaErrName returns the protocol name of a Kafka error (for example
// TOPIC_ALREADY_EXISTS) because that is what people search for and what
// broker logs print; other errors are returned verbatim.
func kafkaErrName(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// kafkaErrDetail prefers the broker's own message, which usually names the
// offending value, and falls back to the generic description of the code.
func kafkaErrDetail(err error, brokerMsg string) string {
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

// statusCell renders an outcome for a table row: OK, or NAME: detail.
func statusCell(err error, brokerMsg string) string {
	if err == nil {
		return "OK"
	}
	name := kafkaErrName(err)
	if d := kafkaErrDetail(err, brokerMsg); d != "" && d != name {
		return name + ": " + d
	}
	return name
}

// formatTopicID renders a topic ID like Kafka's Uuid.toString (URL-safe
// base64 without padding) so IDs can be matched against broker logs and
// kafka-topics.sh output; the all-zero ID means the broker sent none.
func formatTopicID(id [16]byte) string {
	if id == [16]byte{} {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// displayBytes makes keys and values safe for a terminal: printable UTF-8 is
// shown as-is, anything else is Go-quoted so control bytes cannot garble
// the table or the user's terminal.
func displayBytes(b []byte) string {
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

// jsonBytes maps nil to JSON null so scripts can tell "no key" from "empty
// key", which Kafka distinguishes.
func jsonBytes(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}
