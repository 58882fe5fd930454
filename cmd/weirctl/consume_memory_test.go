package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestLimitsForBufferMemory(t *testing.T) {
	for _, tc := range []struct {
		buffer int64
		want   fetchMemoryLimits
	}{
		// The smallest bound: the partition share shrinks with the fetch.
		{64 << 10, fetchMemoryLimits{2, 32 << 10, 32 << 10, 100 << 20}},
		// An odd size rounds down, so the product never exceeds it.
		{1<<20 + 1, fetchMemoryLimits{2, 512 << 10, 512 << 10, 100 << 20}},
		// Past 2 MiB the partition share stays at kgo's 1 MiB default.
		{64 << 20, fetchMemoryLimits{2, 32 << 20, 1 << 20, 100 << 20}},
		// The read limit grows only once a response could outgrow it.
		{1 << 30, fetchMemoryLimits{2, 512 << 20, 1 << 20, 528 << 20}},
	} {
		got, err := limitsForBufferMemory(tc.buffer)
		if err != nil {
			t.Errorf("%d: %v", tc.buffer, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%d: got %+v, want %+v", tc.buffer, got, tc.want)
		}
		if bound := int64(got.ConcurrentFetches) * int64(got.FetchMaxBytes); bound > tc.buffer {
			t.Errorf("%d: fetches × FetchMaxBytes = %d exceeds the bound", tc.buffer, bound)
		}
		if got.PartitionMaxBytes > got.FetchMaxBytes || got.BrokerMaxReadBytes < got.FetchMaxBytes {
			t.Errorf("%d: inconsistent limits %+v", tc.buffer, got)
		}
	}
	for _, bad := range []int64{-1, 1, 64<<10 - 1, 1<<30 + 1} {
		_, err := limitsForBufferMemory(bad)
		clitest.WantErrContains(t, err, "--buffer-memory must be 0")
	}
}

// TestBufferMemoryOptsReachTheClient builds real clients from the options,
// so kgo's own validation (read limit >= FetchMaxBytes, both within 1 GiB)
// is checked at both ends of the range, and reads the values back.
func TestBufferMemoryOptsReachTheClient(t *testing.T) {
	for _, flag := range []string{"64KiB", "8MiB", "1GiB"} {
		opts, err := bufferMemoryOpts(flag)
		if err != nil {
			t.Fatalf("%s: %v", flag, err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers("127.0.0.1:1"))...)
		if err != nil {
			t.Fatalf("%s: kgo refused the options: %v", flag, err)
		}
		n, _ := parseByteSize(flag)
		want, _ := limitsForBufferMemory(n)
		got := fetchMemoryLimits{
			ConcurrentFetches:  cl.OptValue(kgo.MaxConcurrentFetches).(int),
			FetchMaxBytes:      cl.OptValue(kgo.FetchMaxBytes).(int32),
			PartitionMaxBytes:  cl.OptValue(kgo.FetchMaxPartitionBytes).(int32),
			BrokerMaxReadBytes: cl.OptValue(kgo.BrokerMaxReadBytes).(int32),
		}
		cl.Close()
		if got != want {
			t.Errorf("%s: client has %+v, want %+v", flag, got, want)
		}
	}
}

// TestBufferMemoryUnsetKeepsDefaults: without the flag (or with 0) consume
// adds no option, so it behaves as before the flag existed.
func TestBufferMemoryUnsetKeepsDefaults(t *testing.T) {
	for _, flag := range []string{"", "0", "0MiB"} {
		opts, err := bufferMemoryOpts(flag)
		if err != nil || opts != nil {
			t.Errorf("%q: got %d options, %v; want none", flag, len(opts), err)
		}
	}
}

func TestBufferMemoryFlagValidation(t *testing.T) {
	b := []string{"--brokers", "127.0.0.1:1"}
	for _, tc := range []struct {
		value, want string
	}{
		{"-1", "--buffer-memory must be 0"},
		{"-64MiB", "--buffer-memory must be 0"},
		{"1000", "64.0 KiB"},
		{"2GiB", "1.0 GiB"},
		{"64MB", "KiB, MiB or GiB"},
		{"lots", "--buffer-memory"},
	} {
		_, _, err := run(t, "", append(b, "consume", "t", "--buffer-memory", tc.value)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--buffer-memory %s: want error mentioning %q, got %v", tc.value, tc.want, err)
		}
	}
}
