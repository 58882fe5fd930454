package scale

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// procTicksPerSecond is USER_HZ, the unit of utime and stime in
// /proc/PID/stat. The kernel fixes it at 100 for user space on every
// architecture Go supports on Linux, whatever CONFIG_HZ is; reading it
// with sysconf would need cgo for nothing.
const procTicksPerSecond = 100

// scaleProcess is one broker's figures. A nil figure could not be read
// (no metrics URL, a process that died); totals then stay nil too, so a
// sum is never silently short of a broker.
type scaleProcess struct {
	PID        int      `json:"pid"`
	DataDir    string   `json:"data_dir"`
	RSSKiB     *int64   `json:"rss_kib"`
	Threads    *int64   `json:"threads"`
	Goroutines *int64   `json:"goroutines"`
	FDs        *int64   `json:"fds"`
	DiskKiB    *int64   `json:"disk_kib"`
	CPUPercent *float64 `json:"cpu_percent"`
	Error      string   `json:"error,omitempty"`
}

type scaleSampleResult struct {
	WindowSeconds float64        `json:"window_seconds"`
	Brokers       []scaleProcess `json:"brokers"`
	// Total sums the brokers; its CPU is percent of one core for all of
	// them together.
	Total scaleProcess `json:"total"`
}

func scaleSample(ctx context.Context, g *cli.Options, o *scaleSampleOptions) (*scaleSampleResult, error) {
	res := &scaleSampleResult{Brokers: make([]scaleProcess, len(o.pids))}
	startTicks := make([]*int64, len(o.pids))
	start := time.Now()
	for i, pid := range o.pids {
		if t, err := procCPUTicks(pid); err == nil {
			startTicks[i] = &t
		}
	}
	if o.window > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(o.window):
		}
	}
	elapsed := time.Since(start)
	res.WindowSeconds = elapsed.Seconds()
	for i, pid := range o.pids {
		p := scaleProcess{PID: pid, DataDir: o.dataDirs[i]}
		var errs []string
		note := func(err error) {
			if err != nil {
				errs = append(errs, err.Error())
			}
		}
		if o.window > 0 {
			t, err := procCPUTicks(pid)
			note(err)
			if err == nil && startTicks[i] != nil {
				pct := 100 * float64(t-*startTicks[i]) / procTicksPerSecond / elapsed.Seconds()
				p.CPUPercent = &pct
			}
		}
		if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err != nil {
			note(err)
		} else {
			p.RSSKiB = statusKiB(data, "VmRSS:")
			p.Threads = statusKiB(data, "Threads:")
		}
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err != nil {
			note(err)
		} else {
			n := int64(len(ents))
			p.FDs = &n
		}
		if kib, err := diskUsageKiB(o.dataDirs[i]); err != nil {
			note(err)
		} else {
			p.DiskKiB = &kib
		}
		if len(o.metricURLs) > 0 && o.metricURLs[i] != "" {
			n, err := scrapeGoroutines(ctx, g, o.metricURLs[i])
			note(err)
			p.Goroutines = n
		}
		p.Error = strings.Join(errs, "; ")
		res.Brokers[i] = p
	}
	res.Total = sumProcesses(res.Brokers)
	return res, nil
}

func scrapeGoroutines(ctx context.Context, g *cli.Options, url string) (*int64, error) {
	base := strings.TrimSuffix(strings.TrimRight(url, "/"), "/metrics")
	c := admin.NewClient(base, g.Timeout)
	m, err := c.ScrapeMetrics(ctx)
	if err != nil {
		return nil, err
	}
	v, ok := m.Sum(admin.MetricGoroutines, nil)
	if !ok {
		return nil, fmt.Errorf("%s has no %s", url, admin.MetricGoroutines)
	}
	n := int64(math.Round(v))
	return &n, nil
}

// sumProcesses adds each figure over the brokers; a figure missing for
// one broker is missing from the total.
func sumProcesses(ps []scaleProcess) scaleProcess {
	var t scaleProcess
	addInt := func(get func(*scaleProcess) **int64) {
		var sum int64
		for i := range ps {
			v := *get(&ps[i])
			if v == nil {
				return
			}
			sum += *v
		}
		*get(&t) = &sum
	}
	addInt(func(p *scaleProcess) **int64 { return &p.RSSKiB })
	addInt(func(p *scaleProcess) **int64 { return &p.Threads })
	addInt(func(p *scaleProcess) **int64 { return &p.Goroutines })
	addInt(func(p *scaleProcess) **int64 { return &p.FDs })
	addInt(func(p *scaleProcess) **int64 { return &p.DiskKiB })
	var cpu float64
	for _, p := range ps {
		if p.CPUPercent == nil {
			return t
		}
		cpu += *p.CPUPercent
	}
	if len(ps) > 0 {
		t.CPUPercent = &cpu
	}
	return t
}

func procCPUTicks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	t, err := parseProcStatCPU(data)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return t, nil
}

// parseProcStatCPU returns utime+stime (fields 14 and 15) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseProcStatCPU(stat []byte) (int64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	// After ")": field 3 (state) is fields[0], so field N is fields[N-3].
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil || utime < 0 || stime < 0 {
		return 0, fmt.Errorf("unreadable utime %q or stime %q", fields[11], fields[12])
	}
	return utime + stime, nil
}

// statusKiB returns the number after key in a /proc/PID/status ("VmRSS:
// 1234 kB" gives 1234, "Threads: 7" gives 7), or nil without that line.
func statusKiB(status []byte, key string) *int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), key)
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || n < 0 {
			return nil
		}
		return &n
	}
	return nil
}

// diskUsageKiB is what du -sk reports: allocated blocks of everything
// under dir, each hard-linked file once. Allocated rather than apparent
// size, because preallocated sparse index files (Kafka's) would otherwise
// count at their full length. Files vanishing during the walk (segments
// being deleted or renamed) are skipped.
func diskUsageKiB(dir string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var blocks int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		k := inode{uint64(st.Dev), st.Ino}
		if seen[k] {
			return nil
		}
		seen[k] = true
		blocks += st.Blocks
		return nil
	})
	if err != nil {
		return 0, err
	}
	return blocks * 512 / 1024, nil
}

func (r *scaleSampleResult) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, r)
	}
	t := cli.NewTable("PID", "RSS MIB", "THREADS", "GOROUTINES", "FDS", "DISK MIB", "CPU %")
	row := func(name string, p scaleProcess) {
		t.Row(name, fmtKiBAsMiB(p.RSSKiB), fmtInt(p.Threads), fmtInt(p.Goroutines), fmtInt(p.FDs), fmtKiBAsMiB(p.DiskKiB), fmtFloat(p.CPUPercent, 1))
	}
	for _, p := range r.Brokers {
		row(strconv.Itoa(p.PID), p)
	}
	row("total", r.Total)
	if err := t.Write(w); err != nil {
		return err
	}
	for _, p := range r.Brokers {
		if p.Error != "" {
			fmt.Fprintf(w, "pid %d: %s\n", p.PID, p.Error)
		}
	}
	return nil
}

func fmtInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func fmtFloat(v *float64, prec int) string {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', prec, 64)
}

func fmtKiBAsMiB(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(float64(*v)/1024, 'f', 1, 64)
}
