package scale

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
)

func TestParseProcStatCPU(t *testing.T) {
	// A command name with spaces and parentheses must not shift fields.
	stat := "4242 (java (a) b) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 105 0 12345 4000000000 100000 18446744073709551615 0 0 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := parseProcStatCPU([]byte(stat))
	if err != nil || got != 175 {
		t.Fatalf("parseProcStatCPU = %d, %v; want 175", got, err)
	}
	for _, bad := range []string{"4242 java S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 u s 0"} {
		if _, err := parseProcStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseProcStatCPU(%q) accepted", bad)
		}
	}
	// This process's own stat parses.
	if _, err := procCPUTicks(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func TestStatusKiB(t *testing.T) {
	status := []byte("Name:\tweir\nVmRSS:\t  123456 kB\nThreads:\t17\n")
	if v := statusKiB(status, "VmRSS:"); v == nil || *v != 123456 {
		t.Errorf("VmRSS %v", v)
	}
	if v := statusKiB(status, "Threads:"); v == nil || *v != 17 {
		t.Errorf("Threads %v", v)
	}
	if v := statusKiB(status, "VmSwap:"); v != nil {
		t.Errorf("VmSwap %v, want nil", *v)
	}
}

func TestDiskUsageKiB(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte(strings.Repeat("x", 64<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A hard link is counted once, as du does.
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	// A sparse file counts what is allocated, not its length.
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	kib, err := diskUsageKiB(dir)
	if err != nil {
		t.Fatal(err)
	}
	if kib < 64 || kib > 64+64 {
		t.Fatalf("diskUsageKiB = %d KiB, want about 64 (one copy of a, sparse file empty)", kib)
	}
	if _, err := diskUsageKiB(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing directory is not an error")
	}
}

func TestSumProcesses(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i64 := func(v int64) *int64 { return &v }
	ps := []scaleProcess{
		{RSSKiB: i64(100), Threads: i64(10), FDs: i64(5), DiskKiB: i64(1), CPUPercent: f(1.5)},
		{RSSKiB: i64(200), Threads: i64(20), FDs: i64(6), DiskKiB: i64(2), CPUPercent: f(2.5)},
	}
	tot := sumProcesses(ps)
	if *tot.RSSKiB != 300 || *tot.Threads != 30 || *tot.FDs != 11 || *tot.DiskKiB != 3 || *tot.CPUPercent != 4 {
		t.Fatalf("total %+v", tot)
	}
	// Goroutines missing on a broker (a JVM): no total, never a short one.
	if tot.Goroutines != nil {
		t.Errorf("goroutines total %d, want nil", *tot.Goroutines)
	}
	ps[0].Goroutines = i64(7)
	if tot := sumProcesses(ps); tot.Goroutines != nil {
		t.Errorf("goroutines of one broker summed to %d, want nil", *tot.Goroutines)
	}
}

func TestScaleSampleSelf(t *testing.T) {
	// Sampling this test process with no window: every /proc figure but
	// CPU is there.
	dir := t.TempDir()
	out, _, err := benchtest.Run(t, NewCommand, "", "--format", "json", "bench", "scale", "sample", "--pids", strconv.FormatInt(int64(os.Getpid()), 10), "--data-dirs", dir, "--window", "0s")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"rss_kib": `, `"threads": `, `"fds": `, `"disk_kib": `, `"cpu_percent": null`, `"goroutines": null`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}
