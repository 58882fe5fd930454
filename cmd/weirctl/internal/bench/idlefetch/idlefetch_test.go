package idlefetch

import (
	"strings"
	"testing"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
)

func TestParseStatTicks(t *testing.T) {
	// Fields after the command: state ppid pgrp session tty tpgid flags
	// minflt cminflt majflt cmajflt utime stime ...
	stat := "4242 (weir (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 12 0"
	got, err := parseStatTicks(stat)
	if err != nil || got != 287 {
		t.Fatalf("parseStatTicks: %d, %v; want 287", got, err)
	}
	if _, err := parseStatTicks("4242 (weir) S 1"); err == nil {
		t.Fatal("a short stat line parsed")
	}
}

func TestRatios(t *testing.T) {
	rows := []Row{
		{Sessions: "on", RequestBytesFetch: 50, ResponseBytesFetch: 20, BrokerCPUMillisPerSec: 1},
		{Sessions: "off", RequestBytesFetch: 5000, ResponseBytesFetch: 8000, BrokerCPUMillisPerSec: 3},
	}
	r := ratios(rows)
	if r["request_bytes"] != 100 || r["response_bytes"] != 400 || r["broker_cpu"] != 3 {
		t.Fatalf("ratios %v", r)
	}
	if ratios(rows[:1]) != nil {
		t.Fatal("ratios of one mode")
	}
}

func TestFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sessions", "maybe"}, "--sessions"},
		{[]string{"--partitions", "0"}, "--partitions"},
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--consumers", "0"}, "--consumers"},
	} {
		args := append([]string{"--brokers", "127.0.0.1:1", "bench", "idle-fetch", "t"}, tc.args...)
		_, _, err := benchtest.Run(t, NewCommand, "", args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want an error naming %s, got %v", tc.args, tc.want, err)
		}
	}
}
