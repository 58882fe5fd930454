package main

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

// run executes weirctl's command tree in-process, the way the binary would.
func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return clitest.Run(t, newRootCommand, stdin, args...)
}

func TestGlobalFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad format", []string{"--format", "xml", "topic", "list"}, "--format"},
		{"zero timeout", []string{"--timeout", "0s", "topic", "list"}, "--timeout"},
		{"bad broker", []string{"--brokers", "nohostport", "topic", "list"}, "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, "", tc.args...)
			clitest.WantErrContains(t, err, tc.want)
		})
	}
}

func TestBrokersFromEnvironment(t *testing.T) {
	// A broken env value proves the variable is read...
	t.Setenv(cli.BrokersEnv, "envhost-without-port")
	_, _, err := run(t, "", "topic", "create", "x", "-p", "0")
	clitest.WantErrContains(t, err, "envhost-without-port")

	// ...and an explicit flag overrides it: the run gets past broker
	// parsing and fails on the local partitions check instead.
	_, _, err = run(t, "", "--brokers", "127.0.0.1:1", "topic", "create", "x", "-p", "0")
	clitest.WantErrContains(t, err, "--partitions")
}

func TestUnreachableBrokerFailsWithinTimeout(t *testing.T) {
	// Port 1 on loopback is closed, so every dial is refused at once.
	start := time.Now()
	_, _, err := run(t, "", "--brokers", "127.0.0.1:1", "--timeout", "700ms", "topic", "list")
	if err == nil {
		t.Fatal("want an error against a closed port")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %s, want about --timeout", el)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("error should name the broker tried: %v", err)
	}
}

func TestArgumentCounts(t *testing.T) {
	for _, args := range [][]string{
		{"topic", "create"},
		{"topic", "describe"},
		{"topic", "describe", "a", "b"},
		{"topic", "delete"},
		{"topic", "list", "extra"},
		{"produce"},
		{"consume"},
		{"bench", "produce"}, // also shows that bench is part of the tree
	} {
		if _, _, err := run(t, "", args...); err == nil {
			t.Errorf("%v: want an argument error", args)
		}
	}
}

func TestCommandFlagValidation(t *testing.T) {
	b := []string{"--brokers", "127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "create", "t", "-c", "novalue"}, "key=value"},
		{[]string{"topic", "create", "t", "-r", "0"}, "--replicas"},
		{[]string{"produce", "t", "--compression", "brotli"}, "--compression"},
		{[]string{"produce", "t", "--acks", "2"}, "--acks"},
		{[]string{"produce", "t", "-p", "-5"}, "--partition"},
		{[]string{"consume", "t", "-o", "yesterday"}, "--offset"},
		{[]string{"consume", "t", "--isolation", "serializable"}, "--isolation"},
		{[]string{"consume", "t", "-n", "-1"}, "--num"},
	} {
		_, _, err := run(t, "", append(b, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want error mentioning %q, got %v", tc.args, tc.want, err)
		}
	}
}

func TestProduceFailuresAgainstDeadBroker(t *testing.T) {
	// Every record fails once delivery times out; the command must say so
	// per record (capped), exit non-zero, and not hang.
	stdin := strings.Repeat("v\n", 25)
	stdout, stderr, err := run(t, stdin, "--brokers", "127.0.0.1:1", "--timeout", "1s", "produce", "t")
	clitest.WantErrContains(t, err, "25 of 25 records failed")
	if stdout != "" {
		t.Errorf("failures must not print offsets: %q", stdout)
	}
	if n := strings.Count(stderr, "line "); n != maxShownRecordErrors {
		t.Errorf("got %d per-record error lines, want %d:\n%s", n, maxShownRecordErrors, stderr)
	}
	if !strings.Contains(stderr, "not shown") {
		t.Errorf("suppression note missing:\n%s", stderr)
	}

	stdout, _, err = run(t, "a\nb\n", "--brokers", "127.0.0.1:1", "--timeout", "1s", "--format", "json", "produce", "t")
	clitest.WantErrContains(t, err, "2 of 2 records failed")
	if n := strings.Count(stdout, `"error":`); n != 2 {
		t.Errorf("JSON mode must report each failure on stdout:\n%s", stdout)
	}
}

func TestEmptyInputProducesNothing(t *testing.T) {
	stdout, _, err := run(t, "", "--brokers", "127.0.0.1:1", "--timeout", "1s", "produce", "t")
	if err != nil || stdout != "" {
		t.Fatalf("empty stdin: %q, %v", stdout, err)
	}
}
