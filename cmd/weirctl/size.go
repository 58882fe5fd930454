package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the suffixes parseByteSize accepts. Only binary units: "MB"
// means 10^6 to some people and 2^20 to others, and a memory bound that is
// 5% off is a bug report, so the ambiguous spellings are refused.
var byteUnits = []struct {
	suffix string
	size   int64
}{
	{"KiB", 1 << 10},
	{"MiB", 1 << 20},
	{"GiB", 1 << 30},
	{"B", 1},
}

// parseByteSize reads a whole number of bytes with an optional binary
// suffix: "1048576", "512KiB", "64 MiB", "1GiB" (suffixes in any case).
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.size
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: want a whole number of bytes, optionally followed by KiB, MiB or GiB", s)
	}
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// formatByteSize prints n in the largest binary unit it reaches, with one
// decimal, the way the sizes are usually configured (64.0 MiB).
func formatByteSize(n int64) string {
	v := float64(n)
	for _, u := range []struct {
		name string
		size float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if math.Abs(v) >= u.size {
			return strconv.FormatFloat(v/u.size, 'f', 1, 64) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}
