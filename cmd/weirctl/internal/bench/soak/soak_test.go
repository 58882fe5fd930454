package soak

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func TestBenchSoakFlagValidation(t *testing.T) {
	// All of these fail locally, before any broker or admin API is asked.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "0s"}, "--duration must be positive"},
		{[]string{"--sample", "1ms"}, "--sample must be at least 100ms"},
		{[]string{"--warmup", "10m"}, "--warmup (10m0s) must be shorter than --duration"},
		{[]string{"--warmup", "100%"}, "invalid argument"},
		{[]string{"--warmup", "soon"}, "invalid argument"},
		{[]string{"--duration", "30s", "--sample", "10s"}, "leaves 2 samples after warm-up"},
		{[]string{"--topic-prefix", ""}, "--topic-prefix must not be empty"},
		{[]string{"--topics", "0"}, "--topics must be >= 1"},
		{[]string{"--topics", "10", "--partitions", "5"}, "must be at least --topics"},
		{[]string{"-r", "0"}, "--replication-factor must be positive or -1"},
		{[]string{"--connections", "-1"}, "--connections must be >= 0"},
		{[]string{"--churn", "-1"}, "--churn must be >= 0"},
		{[]string{"--connections", "0"}, "there are none"},
		{[]string{"--connection-fetch-wait", "100us"}, "--connection-fetch-wait must be between"},
		{[]string{"--rate", "0"}, "--rate must be at least 1"},
		{[]string{"--record-size", "15"}, "--record-size must be at least 16"},
		{[]string{"--producers", "0"}, "--producers must be >= 1"},
		{[]string{"--producers", "301"}, "must not exceed --partitions"},
		{[]string{"--groups", "0"}, "--groups must be >= 1"},
		{[]string{"-c", "0"}, "--consumers must be >= 1"},
		{[]string{"--pid", "-2"}, "--pid must be a process ID"},
		{[]string{"--tolerance", "0"}, "--tolerance must be a positive percentage"},
		{[]string{"--drain", "0s"}, "--drain must be positive"},
	} {
		args := append([]string{"--brokers", "127.0.0.1:1", "bench", "soak", "--admin-url", "127.0.0.1:1"}, tc.args...)
		_, _, err := benchtest.Run(t, NewCommand, "", args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want error mentioning %q, got %v", tc.args, tc.want, err)
		}
	}
	if _, _, err := benchtest.Run(t, NewCommand, "", "bench", "soak", "extra"); err == nil {
		t.Error("bench soak takes no arguments")
	}
	// --churn 0 needs no connections.
	o := soakDefaults(t)
	o.connections, o.churn = 0, 0
	if err := o.validate(); err != nil {
		t.Errorf("--connections 0 --churn 0: %v", err)
	}
}

// soakDefaults returns the options as the command's defaults set them.
func soakDefaults(t *testing.T) *soakOptions {
	t.Helper()
	cmd := NewCommand(&cli.Options{})
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	o := &soakOptions{}
	fl := cmd.Flags()
	get := func(name string) string { return fl.Lookup(name).Value.String() }
	parse := func(name string, dst any) {
		if _, err := fmt.Sscan(get(name), dst); err != nil {
			t.Fatalf("--%s default %q: %v", name, get(name), err)
		}
	}
	dur := func(name string) time.Duration {
		d, err := time.ParseDuration(get(name))
		if err != nil {
			t.Fatalf("--%s default: %v", name, err)
		}
		return d
	}
	o.duration, o.sample, o.connWait, o.drain = dur("duration"), dur("sample"), dur("connection-fetch-wait"), dur("drain")
	if err := o.warmup.Set(get("warmup")); err != nil {
		t.Fatal(err)
	}
	o.topicPrefix = get("topic-prefix")
	parse("topics", &o.topics)
	parse("partitions", &o.partitions)
	parse("replication-factor", &o.replicas)
	parse("connections", &o.connections)
	parse("churn", &o.churn)
	parse("rate", &o.rate)
	parse("record-size", &o.recordSize)
	parse("producers", &o.producers)
	parse("groups", &o.groups)
	parse("consumers", &o.consumers)
	parse("pid", &o.pid)
	parse("tolerance", &o.tolerance)
	return o
}

func TestBenchSoakDefaults(t *testing.T) {
	cmd := NewCommand(&cli.Options{})
	for flag, want := range map[string]string{
		"duration": "10m0s", "warmup": "20%", "sample": "10s", "topic-prefix": "soak", "topics": "10", "partitions": "300",
		"replication-factor": "-1", "connections": "2000", "churn": "10", "connection-fetch-wait": "5s", "rate": "1000",
		"record-size": "512", "producers": "4", "groups": "2", "consumers": "3", "pid": "0", "tolerance": "10", "drain": "1m0s",
	} {
		if got := cmd.Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s default: got %s, want %s", flag, got, want)
		}
	}
	o := soakDefaults(t)
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults must be valid: %v", err)
	}
	if w := o.warmup.of(o.duration); w != 2*time.Minute {
		t.Errorf("warm-up: %s", w)
	}
	if n := o.judgedSamples(); n != 48 {
		t.Errorf("samples after warm-up: %d", n)
	}
}

func TestBenchSoakAgainstDeadAdminAPIFailsFast(t *testing.T) {
	start := time.Now()
	out, _, err := benchtest.Run(t, NewCommand, "", "--brokers", "127.0.0.1:1", "--timeout", "500ms", "bench", "soak", "--admin-url", "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "judges growth") {
		t.Errorf("want the admin API's absence pointed out, got %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s", el)
	}
	if out != "" {
		t.Errorf("no summary without a load, got %q", out)
	}
}

func TestSoakWarmup(t *testing.T) {
	var w soakWarmup
	for _, tc := range []struct {
		in   string
		want time.Duration // of a 10m run
		str  string
	}{
		{"20%", 2 * time.Minute, "20%"},
		{" 12.5 % ", 75 * time.Second, "12.5%"},
		{"0%", 0, "0%"},
		{"90s", 90 * time.Second, "1m30s"},
		{"0s", 0, "0s"},
	} {
		if err := w.Set(tc.in); err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := w.of(10 * time.Minute); got != tc.want || w.String() != tc.str {
			t.Errorf("%q: %s (%s), want %s (%s)", tc.in, got, w.String(), tc.want, tc.str)
		}
	}
	for _, bad := range []string{"100%", "-5%", "x%", "-1s", "soon", ""} {
		if err := w.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSoakTopicPartitions(t *testing.T) {
	o := &soakOptions{topicPrefix: "s", topics: 3, partitions: 8}
	if got := o.topicPartitions(); !slices.Equal(got, []int32{3, 3, 2}) {
		t.Errorf("8 over 3: %v", got)
	}
	if got := o.topicNames(); !slices.Equal(got, []string{"s-0", "s-1", "s-2"}) {
		t.Errorf("names: %v", got)
	}
	o.topics, o.partitions = 10, 300
	for _, n := range o.topicPartitions() {
		if n != 30 {
			t.Fatalf("300 over 10: %v", o.topicPartitions())
		}
	}
}
