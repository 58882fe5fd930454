package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// Run executes the command tree newRoot builds in-process, the
// way the binary would: newRoot's tree writes its output to the writer
// it is given, stdin is its input.
func Run(t *testing.T, newRoot func(io.Writer) *cobra.Command, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// WantErrContains fails the test unless err is an error whose text
// contains sub.
func WantErrContains(t *testing.T, err error, sub string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error containing %q, got nil", sub)
	}
	if !strings.Contains(err.Error(), sub) {
		t.Fatalf("want error containing %q, got %q", sub, err)
	}
}

// JSONOf is v's compact JSON encoding.
func JSONOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// YAMLAsJSON decodes a YAML document and re-encodes it as compact JSON,
// so it can be compared with the JSON output of the same printer.
func YAMLAsJSON(t *testing.T, data []byte) string {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return JSONOf(t, v)
}

// CompactJSON re-encodes a JSON document compactly, with keys sorted as
// YAMLAsJSON sorts them, so that the two compare.
func CompactJSON(t *testing.T, data []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return JSONOf(t, v)
}
