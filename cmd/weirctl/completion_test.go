package main

import (
	"strings"
	"testing"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, _, err := run(t, "", "completion", shell)
		if err != nil || !strings.Contains(out, "weirctl") {
			t.Errorf("completion %s: %v\n%.200s", shell, err, out)
		}
	}
}

func TestFormatFlagCompletion(t *testing.T) {
	// A broken environment must not break completion.
	t.Setenv(cli.BrokersEnv, "no-port")
	for _, args := range [][]string{
		{"__complete", "--format", ""},
		{"__complete", "topic", "list", "--format", ""},
	} {
		out, _, err := run(t, "", args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || strings.Join(lines[:3], ",") != "table,json,yaml" || !strings.HasPrefix(lines[3], ":") {
			t.Errorf("%v: got %q", args, out)
		}
	}
}
