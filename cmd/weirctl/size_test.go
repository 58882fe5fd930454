package main

import (
	"testing"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0":        0,
		"1048576":  1 << 20,
		"512KiB":   512 << 10,
		"64MiB":    64 << 20,
		" 64 mib ": 64 << 20,
		"1GiB":     1 << 30,
		"2gib":     2 << 30,
		"100B":     100,
		"100 b":    100,
		"-1":       -1,
		"-1KiB":    -1 << 10,
	} {
		got, err := parseByteSize(in)
		if err != nil || got != want {
			t.Errorf("%q: got %d, %v; want %d", in, got, err, want)
		}
	}
	// Decimal units are refused rather than guessed at; so are fractions,
	// bare suffixes and values that overflow.
	for _, bad := range []string{"", " ", "MiB", "1MB", "1KB", "1G", "1.5GiB", "x", "1 2MiB", "0x10", "9223372036854775807KiB", "99999999999999999999"} {
		if got, err := parseByteSize(bad); err == nil {
			t.Errorf("%q: got %d, want an error", bad, got)
		}
	}
}

func TestFormatByteSize(t *testing.T) {
	for n, want := range map[int64]string{
		0:                 "0 B",
		1023:              "1023 B",
		1 << 10:           "1.0 KiB",
		64 << 20:          "64.0 MiB",
		96<<20 + 512<<10:  "96.5 MiB",
		3 << 30:           "3.0 GiB",
		-(2 << 20):        "-2.0 MiB",
		1<<40 + 512<<20:   "1024.5 GiB",
		(1 << 20) - 1<<10: "1023.0 KiB",
	} {
		if got := formatByteSize(n); got != want {
			t.Errorf("%d: got %q, want %q", n, got, want)
		}
	}
}
