package memory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func TestBenchMemoryFlagValidation(t *testing.T) {
	// All of these fail locally, before any broker or admin API is asked.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "0"}, "--partitions must be >= 1"},
		{[]string{"-r", "0"}, "--replication-factor must be positive or -1"},
		{[]string{"--record-size", "0"}, "--record-size must be positive"},
		{[]string{"--batch-max-bytes", "100"}, "--batch-max-bytes must be at least 1024"},
		{[]string{"--record-size", "1048576"}, "does not fit a batch"},
		{[]string{"--backlog-bytes", "100"}, "--backlog-bytes must hold at least one record"},
		{[]string{"--consumers", "0"}, "--consumers must be >= 1"},
		{[]string{"--stalled", "-1"}, "--stalled must be >= 0"},
		{[]string{"--producers", "-1"}, "--producers must be >= 0"},
		{[]string{"--produce-bytes", "-1"}, "--produce-bytes must be >= 0"},
		{[]string{"--produce-bytes", "1000"}, "less than one record"},
		{[]string{"--fetch-max-bytes", "0"}, "--fetch-max-bytes must be between"},
		{[]string{"--fetch-max-bytes", "2000000000"}, "--fetch-max-bytes must be between"},
		{[]string{"--fetch-max-partition-bytes", "0"}, "--fetch-max-partition-bytes must be positive"},
		{[]string{"--fetch-max-wait", "100us"}, "--fetch-max-wait must be between"},
		{[]string{"--fetch-min-bytes", "-1"}, "--fetch-min-bytes must be >= 0"},
		{[]string{"--sample", "1ms"}, "--sample must be at least 10ms"},
		{[]string{"--max-duration", "0s"}, "--max-duration must be positive"},
	} {
		args := append([]string{"--brokers", "127.0.0.1:1", "bench", "memory", "--admin-url", "127.0.0.1:1", "t"}, tc.args...)
		_, _, err := benchtest.Run(t, NewCommand, "", args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want error mentioning %q, got %v", tc.args, tc.want, err)
		}
	}
	if _, _, err := benchtest.Run(t, NewCommand, "", "bench", "memory"); err == nil {
		t.Error("TOPIC is required")
	}
	// No producers makes --produce-bytes irrelevant, however small.
	o := memoryDefaults(t)
	o.producers, o.produceBytes = 0, 0
	if err := o.validate(); err != nil {
		t.Errorf("--producers 0 --produce-bytes 0: %v", err)
	}
}

// memoryDefaults returns the options as the command's defaults set them.
func memoryDefaults(t *testing.T) *memoryOptions {
	t.Helper()
	o := &memoryOptions{}
	cmd := NewCommand(&cli.Options{})
	fl := cmd.Flags()
	get := func(name string) string { return fl.Lookup(name).DefValue }
	parse := func(name string, dst any) {
		if _, err := fmt.Sscan(get(name), dst); err != nil {
			t.Fatalf("--%s default %q: %v", name, get(name), err)
		}
	}
	parse("partitions", &o.partitions)
	parse("replication-factor", &o.replicas)
	parse("backlog-bytes", &o.backlogBytes)
	parse("record-size", &o.recordSize)
	parse("batch-max-bytes", &o.batchMaxBytes)
	parse("consumers", &o.consumers)
	parse("stalled", &o.stalled)
	parse("producers", &o.producers)
	parse("produce-bytes", &o.produceBytes)
	parse("fetch-max-bytes", &o.fetch.MaxBytes)
	parse("fetch-max-partition-bytes", &o.fetch.MaxPartitionBytes)
	parse("fetch-min-bytes", &o.fetch.MinBytes)
	var err error
	if o.maxWait, err = time.ParseDuration(get("fetch-max-wait")); err != nil {
		t.Fatal(err)
	}
	if o.sample, err = time.ParseDuration(get("sample")); err != nil {
		t.Fatal(err)
	}
	if o.maxDuration, err = time.ParseDuration(get("max-duration")); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestBenchMemoryDefaults(t *testing.T) {
	cmd := NewCommand(&cli.Options{})
	for flag, want := range map[string]string{
		"partitions": "8", "replication-factor": "-1", "backlog-bytes": "2147483648", "record-size": "16384",
		"batch-max-bytes": "1048576", "consumers": "200", "stalled": "1", "producers": "4",
		"produce-bytes": "268435456", "fetch-max-bytes": "52428800", "fetch-max-partition-bytes": "10485760",
		"fetch-max-wait": "500ms", "fetch-min-bytes": "1", "sample": "100ms", "max-duration": "15m0s",
	} {
		if got := cmd.Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s default: got %s, want %s", flag, got, want)
		}
	}
	o := memoryDefaults(t)
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults must be valid: %v", err)
	}
	if o.fetch.MaxWaitMs != 500 {
		t.Errorf("max wait: got %d ms", o.fetch.MaxWaitMs)
	}
	// 2 GiB of 16 KiB records over 8 partitions; 256 MiB over 4 producers.
	if got := o.backlogRecords(8); got != 16384 {
		t.Errorf("backlog records per partition: got %d, want 16384", got)
	}
	if got := o.producerRecords(); got != 4096 {
		t.Errorf("records per producer: got %d, want 4096", got)
	}
	// Rounded up, never zero.
	o.backlogBytes, o.recordSize = 10, 3
	if got := o.backlogRecords(3); got != 2 { // 4 records over 3 partitions
		t.Errorf("backlog records per partition: got %d, want 2", got)
	}
	if got := o.backlogRecords(100); got != 1 {
		t.Errorf("backlog records per partition: got %d, want 1", got)
	}
}

func TestBenchMemoryAgainstDeadBrokerFailsFast(t *testing.T) {
	start := time.Now()
	out, stderr, err := benchtest.Run(t, NewCommand, "", "--brokers", "127.0.0.1:1", "--timeout", "500ms", "bench", "memory", "t", "--admin-url", "127.0.0.1:1")
	if err == nil {
		t.Error("want error")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s", el)
	}
	if !strings.Contains(stderr, "broker figures unavailable") {
		t.Errorf("an unreachable admin API must be pointed out: %q", stderr)
	}
	if out != "" {
		t.Errorf("no summary before the consume phase, got %q", out)
	}
}
