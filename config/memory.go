package config

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Bounds of the derived fetch memory budget.
const (
	minDerivedFetchBudget = 64 << 20
	maxDerivedFetchBudget = 4 << 30
)

// FetchMemoryBudget is the fetch response budget the node runs with: the
// configured bytes, the derived default for 0, and 0 (unbounded) for -1.
func (n Node) FetchMemoryBudget() int64 {
	switch b := n.FetchMemoryBudgetBytes; {
	case b < 0:
		return 0
	case b == 0:
		return DefaultFetchMemoryBudget(AvailableMemory())
	default:
		return b
	}
}

// DefaultFetchMemoryBudget is an eighth of the memory available, between
// 64 MiB and 4 GiB: room for the fetches of many consumers without
// letting them crowd out the page cache the log reads from.
func DefaultFetchMemoryBudget(available int64) int64 {
	return min(max(available/8, minDerivedFetchBudget), maxDerivedFetchBudget)
}

// Bounds of the memory a broker's Raft followers keep for their applies.
const (
	minRaftHandOff = 64 << 20
	maxRaftHandOff = 256 << 20
)

// RaftHandOffBytes is what a broker's followers may keep of the entries
// they stored for their applies to take instead of reading them back: a
// 32nd of the memory available, between 64 MiB and 256 MiB (the whole
// 256 MiB from 8 GiB up).
func RaftHandOffBytes(available int64) int64 {
	return min(max(available/32, minRaftHandOff), maxRaftHandOff)
}

// AvailableMemory is the memory this process may use: its cgroup's limit
// (v2 memory.max, or v1 memory.limit_in_bytes) when it has one, else the
// machine's (MemTotal); 0 when neither can be read.
func AvailableMemory() int64 {
	total := memTotal()
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if limit := readCgroupLimit(path); limit > 0 && (total == 0 || limit < total) {
			return limit
		}
	}
	return total
}

// readCgroupLimit reads a cgroup memory limit file: a byte count, or
// "max" (no limit), which reads as 0.
func readCgroupLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || v <= 0 {
		return 0
	}
	return v
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// MemTotal:       24524876 kB
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
