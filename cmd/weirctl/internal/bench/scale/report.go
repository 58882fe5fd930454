package scale

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// The directory bench scale report reads, as .ci/bench-scale.sh writes it:
//
//	systems                 system directory names, one a line, in order
//	params.json             the run's parameters (copied into the summary)
//	SYS/label               one line naming what ran (version, commit)
//	SYS/skipped             present when SYS did not run: the reason
//	SYS/notes               optional: things that went wrong, one a line
//	SYS/pN/empty.json       bench scale sample of the empty cluster
//	SYS/pN/create.json      bench scale create of the N-partition topic
//	SYS/pN/idle.json        bench scale sample after creating it
//	SYS/pN/layout.json      bench scale layout just before the kill
//	SYS/pN/failover.json    bench scale wait --until moved after it
//	SYS/pN/out.json         bench scale wait --until out after that
//	SYS/pN/recover.json     bench scale wait --until settled after restart
//	SYS/pN/notes            optional, as SYS/notes
//	SYS/produce/create.json     bench scale create of the produce topic
//	SYS/produce/producer-I.json bench produce summaries, one per producer
//
// A missing file is a figure not measured ("-"), never an error: a run
// cut short by a timeout still reports what it got.

// scaleReferenceSystem is the system ratios are taken against.
const scaleReferenceSystem = "kafka"

// scaleBaselineSystem is weir built from BASELINE_REF; weir's figures
// are also given as ratios to it.
const scaleBaselineSystem = "weir-baseline"

var scaleRunDir = regexp.MustCompile(`^p([0-9]+)$`)

type scaleReport struct {
	Params      json.RawMessage   `json:"params,omitempty"`
	Systems     []*scaleSystem    `json:"systems"`
	Comparisons []scaleComparison `json:"comparisons"`
}

type scaleSystem struct {
	Name    string          `json:"name"`
	Label   string          `json:"label"`
	Skipped string          `json:"skipped,omitempty"`
	Notes   []string        `json:"notes,omitempty"`
	Runs    []*scaleRun     `json:"runs"`
	Produce *scaleProduceEx `json:"produce"`
}

// scaleRun is one fresh cluster: empty, then N partitions, then a
// failover.
type scaleRun struct {
	Partitions int                `json:"partitions"`
	Notes      []string           `json:"notes,omitempty"`
	Empty      *scaleSampleResult `json:"empty"`
	Create     *scaleCreateResult `json:"create"`
	Idle       *scaleSampleResult `json:"idle"`
	Layout     *scaleLayoutResult `json:"layout"`
	Failover   *scaleWaitResult   `json:"failover"`
	Out        *scaleWaitResult   `json:"out"`
	Recover    *scaleWaitResult   `json:"recover"`
	Figures    scaleFigures       `json:"figures"`
}

// scaleFigures are derived from a run. Per replica and per partition
// figures are the growth from the empty cluster divided by the replicas
// (partitions x replication factor) or partitions asked for.
type scaleFigures struct {
	Replicas               int      `json:"replicas"`
	CreateSeconds          *float64 `json:"create_seconds"`
	SettleSeconds          *float64 `json:"settle_seconds"`
	EmptyRSSKiB            *int64   `json:"empty_rss_kib"`
	IdleRSSKiB             *int64   `json:"idle_rss_kib"`
	RSSKiBPerReplica       *float64 `json:"rss_kib_per_replica"`
	EmptyThreads           *int64   `json:"empty_threads"`
	IdleThreads            *int64   `json:"idle_threads"`
	EmptyGoroutines        *int64   `json:"empty_goroutines"`
	IdleGoroutines         *int64   `json:"idle_goroutines"`
	GoroutinesPerReplica   *float64 `json:"goroutines_per_replica"`
	EmptyFDs               *int64   `json:"empty_fds"`
	IdleFDs                *int64   `json:"idle_fds"`
	FDsPerReplica          *float64 `json:"fds_per_replica"`
	EmptyDiskKiB           *int64   `json:"empty_disk_kib"`
	IdleDiskKiB            *int64   `json:"idle_disk_kib"`
	DiskKiBPerPartition    *float64 `json:"disk_kib_per_partition"`
	EmptyCPUPercent        *float64 `json:"empty_cpu_percent"`
	IdleCPUPercent         *float64 `json:"idle_cpu_percent"`
	KilledBroker           *int32   `json:"killed_broker"`
	KilledBrokerLed        *int     `json:"killed_broker_led"`
	FailoverSeconds        *float64 `json:"failover_seconds"`
	FailoverTimeoutSeconds float64  `json:"failover_timeout_seconds,omitempty"`
	OutSeconds             *float64 `json:"out_seconds"`
	OutTimeoutSeconds      float64  `json:"out_timeout_seconds,omitempty"`
	RecoverSeconds         *float64 `json:"recover_seconds"`
	RecoverTimeoutSeconds  float64  `json:"recover_timeout_seconds,omitempty"`
}

// scaleProduceEx is the produce phase: several bench produce processes
// at once, added up.
type scaleProduceEx struct {
	Create    *scaleCreateResult `json:"create"`
	Producers int                `json:"producers"`
	Records   int64              `json:"records"`
	Bytes     int64              `json:"bytes"`
	Errors    int64              `json:"errors"`
	// Seconds is the longest producer's; the rates are the totals over
	// it, since the producers start together and the slowest one ends
	// the phase. Complete: every producer reached its record count or
	// its time limit without failing.
	Seconds       float64  `json:"seconds"`
	RecordsPerSec float64  `json:"records_per_sec"`
	MBPerSec      float64  `json:"mb_per_sec"`
	MaxP99Ms      float64  `json:"max_p99_ms"`
	Stopped       []string `json:"stopped"`
	Complete      bool     `json:"complete"`
}

type scaleComparison struct {
	Metric     string              `json:"metric"`
	Partitions int                 `json:"partitions,omitempty"`
	Values     map[string]*float64 `json:"values"`
	Ratios     map[string]*float64 `json:"ratios"`
}

func loadScaleReport(dir string) (*scaleReport, error) {
	names, err := scaleReadLines(filepath.Join(dir, "systems"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (is this a bench-scale output directory?)", dir, err)
	}
	rep := &scaleReport{}
	if p, err := os.ReadFile(filepath.Join(dir, "params.json")); err == nil && json.Valid(p) {
		rep.Params = json.RawMessage(p)
	}
	for _, name := range names {
		s, err := loadScaleSystem(filepath.Join(dir, name), name)
		if err != nil {
			return nil, err
		}
		rep.Systems = append(rep.Systems, s)
	}
	rep.Comparisons = compareScaleSystems(rep.Systems)
	return rep, nil
}

func loadScaleSystem(dir, name string) (*scaleSystem, error) {
	s := &scaleSystem{Name: name, Label: name}
	if l, err := scaleReadLines(filepath.Join(dir, "label")); err == nil && len(l) > 0 {
		s.Label = l[0]
	}
	if b, err := os.ReadFile(filepath.Join(dir, "skipped")); err == nil {
		s.Skipped = strings.TrimSpace(string(b))
		if s.Skipped == "" {
			s.Skipped = "skipped"
		}
	}
	s.Notes, _ = scaleReadLines(filepath.Join(dir, "notes"))
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		m := scaleRunDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		r, err := loadScaleRun(filepath.Join(dir, e.Name()), n)
		if err != nil {
			return nil, err
		}
		s.Runs = append(s.Runs, r)
	}
	slices.SortFunc(s.Runs, func(a, b *scaleRun) int { return a.Partitions - b.Partitions })
	p, err := loadScaleProduce(filepath.Join(dir, "produce"))
	if err != nil {
		return nil, err
	}
	s.Produce = p
	return s, nil
}

func loadScaleRun(dir string, partitions int) (*scaleRun, error) {
	r := &scaleRun{Partitions: partitions}
	r.Notes, _ = scaleReadLines(filepath.Join(dir, "notes"))
	for _, f := range []struct {
		name string
		into any
	}{
		{"empty.json", &r.Empty}, {"create.json", &r.Create}, {"idle.json", &r.Idle},
		{"layout.json", &r.Layout}, {"failover.json", &r.Failover}, {"out.json", &r.Out}, {"recover.json", &r.Recover},
	} {
		if err := readJSONIfPresent(filepath.Join(dir, f.name), f.into); err != nil {
			return nil, err
		}
	}
	r.Figures = r.figures()
	return r, nil
}

func loadScaleProduce(dir string) (*scaleProduceEx, error) {
	files, err := filepath.Glob(filepath.Join(dir, "producer-*.json"))
	if err != nil {
		return nil, err
	}
	var create *scaleCreateResult
	if err := readJSONIfPresent(filepath.Join(dir, "create.json"), &create); err != nil {
		return nil, err
	}
	if len(files) == 0 && create == nil {
		return nil, nil
	}
	var sums []harness.Summary
	for _, f := range files {
		var s *harness.Summary
		if err := readJSONIfPresent(f, &s); err != nil {
			return nil, err
		}
		if s == nil {
			// A producer that died before printing a summary.
			sums = append(sums, harness.Summary{Stopped: "no summary"})
			continue
		}
		sums = append(sums, *s)
	}
	p := summariseProduce(sums)
	p.Create = create
	return p, nil
}

// summariseProduce adds up concurrent producers.
func summariseProduce(sums []harness.Summary) *scaleProduceEx {
	p := &scaleProduceEx{Producers: len(sums), Complete: len(sums) > 0}
	for _, s := range sums {
		p.Records += s.Records
		p.Bytes += s.Bytes
		p.Errors += s.Errors
		p.Seconds = max(p.Seconds, s.Seconds)
		p.MaxP99Ms = max(p.MaxP99Ms, s.P99Ms)
		p.Stopped = append(p.Stopped, s.Stopped)
		// A producer cut short by --duration still measured a rate;
		// one that failed or stalled did not.
		if s.Stopped != harness.StopRecords && s.Stopped != harness.StopDuration {
			p.Complete = false
		}
	}
	if p.Seconds > 0 {
		p.RecordsPerSec = float64(p.Records) / p.Seconds
		p.MBPerSec = float64(p.Bytes) / harness.BytesPerMB / p.Seconds
	}
	return p
}

func (r *scaleRun) figures() scaleFigures {
	var f scaleFigures
	if r.Create != nil {
		f.Replicas = int(r.Create.Partitions) * int(r.Create.ReplicationFactor)
		cs := r.Create.CreateSeconds
		if r.Create.CreateError == "" {
			f.CreateSeconds = &cs
		}
		f.SettleSeconds = r.Create.SettleSeconds
	}
	var empty, idle scaleProcess
	if r.Empty != nil {
		empty = r.Empty.Total
	}
	if r.Idle != nil {
		idle = r.Idle.Total
	}
	f.EmptyRSSKiB, f.IdleRSSKiB = empty.RSSKiB, idle.RSSKiB
	f.EmptyThreads, f.IdleThreads = empty.Threads, idle.Threads
	f.EmptyGoroutines, f.IdleGoroutines = empty.Goroutines, idle.Goroutines
	f.EmptyFDs, f.IdleFDs = empty.FDs, idle.FDs
	f.EmptyDiskKiB, f.IdleDiskKiB = empty.DiskKiB, idle.DiskKiB
	f.EmptyCPUPercent, f.IdleCPUPercent = empty.CPUPercent, idle.CPUPercent
	f.RSSKiBPerReplica = growthPer(empty.RSSKiB, idle.RSSKiB, f.Replicas)
	f.GoroutinesPerReplica = growthPer(empty.Goroutines, idle.Goroutines, f.Replicas)
	f.FDsPerReplica = growthPer(empty.FDs, idle.FDs, f.Replicas)
	if r.Create != nil {
		f.DiskKiBPerPartition = growthPer(empty.DiskKiB, idle.DiskKiB, int(r.Create.Partitions))
	}
	if r.Layout != nil && r.Layout.MostLeaders >= 0 {
		id, n := r.Layout.MostLeaders, r.Layout.MostLeadersCount
		f.KilledBroker, f.KilledBrokerLed = &id, &n
	}
	if r.Failover != nil {
		f.FailoverSeconds, f.FailoverTimeoutSeconds = r.Failover.Seconds, r.Failover.TimeoutSeconds
	}
	if r.Out != nil {
		f.OutSeconds, f.OutTimeoutSeconds = r.Out.Seconds, r.Out.TimeoutSeconds
	}
	if r.Recover != nil {
		f.RecoverSeconds, f.RecoverTimeoutSeconds = r.Recover.Seconds, r.Recover.TimeoutSeconds
	}
	return f
}

// growthPer is (after - before) / n, nil when anything is missing.
func growthPer(before, after *int64, n int) *float64 {
	if before == nil || after == nil || n <= 0 {
		return nil
	}
	v := float64(*after-*before) / float64(n)
	return &v
}

// scaleMetric is one row of the side-by-side table.
type scaleMetric struct {
	name    string
	perRun  func(f scaleFigures) *float64
	produce func(p *scaleProduceEx) *float64
	prec    int
}

func intAsFloat(v *int64) *float64 {
	if v == nil {
		return nil
	}
	f := float64(*v)
	return &f
}

func scaleMetrics() []scaleMetric {
	return []scaleMetric{
		{name: "CreateTopics answered s", perRun: func(f scaleFigures) *float64 { return f.CreateSeconds }, prec: 2},
		{name: "all led + full ISR s", perRun: func(f scaleFigures) *float64 { return f.SettleSeconds }, prec: 2},
		{name: "RSS KiB / replica", perRun: func(f scaleFigures) *float64 { return f.RSSKiBPerReplica }, prec: 1},
		{name: "fds / replica", perRun: func(f scaleFigures) *float64 { return f.FDsPerReplica }, prec: 2},
		{name: "disk KiB / partition", perRun: func(f scaleFigures) *float64 { return f.DiskKiBPerPartition }, prec: 1},
		{name: "threads (3 brokers)", perRun: func(f scaleFigures) *float64 { return intAsFloat(f.IdleThreads) }, prec: 0},
		{name: "RSS MiB (3 brokers)", perRun: func(f scaleFigures) *float64 { return kibToMiB(f.IdleRSSKiB) }, prec: 0},
		{name: "idle CPU % of a core", perRun: func(f scaleFigures) *float64 { return f.IdleCPUPercent }, prec: 1},
		{name: "failover: re-led s", perRun: func(f scaleFigures) *float64 { return f.FailoverSeconds }, prec: 2},
		{name: "out of every ISR s", perRun: func(f scaleFigures) *float64 { return f.OutSeconds }, prec: 2},
		{name: "rejoin: ISR full s", perRun: func(f scaleFigures) *float64 { return f.RecoverSeconds }, prec: 2},
		{name: "produce MB/s", produce: func(p *scaleProduceEx) *float64 { return produceFigure(p, p.MBPerSec) }, prec: 2},
		{name: "produce records/s", produce: func(p *scaleProduceEx) *float64 { return produceFigure(p, p.RecordsPerSec) }, prec: 0},
	}
}

// produceFigure is nil for a produce phase that did not complete, whose
// rate would compare a different amount of work.
func produceFigure(p *scaleProduceEx, v float64) *float64 {
	if p == nil || !p.Complete || p.Seconds <= 0 {
		return nil
	}
	return &v
}

func kibToMiB(v *int64) *float64 {
	if v == nil {
		return nil
	}
	f := float64(*v) / 1024
	return &f
}

// ratioPairs names the ratio columns: every other system against Kafka,
// and weir against its baseline build when both ran.
func ratioPairs(systems []*scaleSystem) [][2]string {
	ran := map[string]bool{}
	for _, s := range systems {
		if s.Skipped == "" {
			ran[s.Name] = true
		}
	}
	var pairs [][2]string
	if ran[scaleReferenceSystem] {
		for _, s := range systems {
			if s.Name != scaleReferenceSystem && ran[s.Name] {
				pairs = append(pairs, [2]string{s.Name, scaleReferenceSystem})
			}
		}
	}
	if ran["weir"] && ran[scaleBaselineSystem] {
		pairs = append(pairs, [2]string{"weir", scaleBaselineSystem})
	}
	return pairs
}

func compareScaleSystems(systems []*scaleSystem) []scaleComparison {
	var ns []int
	for _, s := range systems {
		for _, r := range s.Runs {
			if !slices.Contains(ns, r.Partitions) {
				ns = append(ns, r.Partitions)
			}
		}
	}
	slices.Sort(ns)
	pairs := ratioPairs(systems)
	var out []scaleComparison
	add := func(metric string, n int, value func(s *scaleSystem) *float64) {
		c := scaleComparison{Metric: metric, Partitions: n, Values: map[string]*float64{}, Ratios: map[string]*float64{}}
		for _, s := range systems {
			if s.Skipped == "" {
				c.Values[s.Name] = value(s)
			}
		}
		for _, p := range pairs {
			c.Ratios[p[0]+"/"+p[1]] = scaleRatio(c.Values[p[0]], c.Values[p[1]])
		}
		out = append(out, c)
	}
	for _, m := range scaleMetrics() {
		if m.produce != nil {
			add(m.name, 0, func(s *scaleSystem) *float64 { return m.produce(s.Produce) })
			continue
		}
		for _, n := range ns {
			add(m.name, n, func(s *scaleSystem) *float64 {
				for _, r := range s.Runs {
					if r.Partitions == n {
						return m.perRun(r.Figures)
					}
				}
				return nil
			})
		}
	}
	return out
}

func scaleRatio(a, b *float64) *float64 {
	if a == nil || b == nil || *b == 0 {
		return nil
	}
	v := *a / *b
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func (rep *scaleReport) writeJSONFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := cli.WriteJSON(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (rep *scaleReport) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, rep)
	}
	for _, s := range rep.Systems {
		if err := s.write(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return rep.writeComparison(w)
}

func (s *scaleSystem) write(w io.Writer) error {
	fmt.Fprintf(w, "== %s\n", s.Label)
	if s.Skipped != "" {
		fmt.Fprintf(w, "not measured: %s\n", s.Skipped)
		return nil
	}
	headers := []string{"FIGURE (3 BROKERS, RF=3)"}
	for _, r := range s.Runs {
		headers = append(headers, "EMPTY", fmt.Sprintf("%d PARTITIONS", r.Partitions))
	}
	t := cli.NewTable(headers...)
	row := func(name string, empty, full func(f scaleFigures) string) {
		cells := []any{name}
		for _, r := range s.Runs {
			cells = append(cells, empty(r.Figures), full(r.Figures))
		}
		t.Row(cells...)
	}
	dash := func(scaleFigures) string { return "" }
	timeRow := func(name string, get func(r *scaleRun) (*float64, float64)) {
		cells := []any{name}
		for _, r := range s.Runs {
			v, limit := get(r)
			cells = append(cells, "", fmtTime(v, limit))
		}
		t.Row(cells...)
	}
	timeRow("CreateTopics answered s", func(r *scaleRun) (*float64, float64) {
		if r.Create != nil && r.Create.CreateError != "" {
			return nil, 0
		}
		return r.Figures.CreateSeconds, 0
	})
	timeRow("all led + full ISR s", func(r *scaleRun) (*float64, float64) {
		if r.Create == nil {
			return nil, 0
		}
		return r.Create.SettleSeconds, r.Create.SettleTimeoutSeconds
	})
	row("RSS MiB", func(f scaleFigures) string { return fmtKiBAsMiB(f.EmptyRSSKiB) }, func(f scaleFigures) string { return fmtKiBAsMiB(f.IdleRSSKiB) })
	row("threads", func(f scaleFigures) string { return fmtInt(f.EmptyThreads) }, func(f scaleFigures) string { return fmtInt(f.IdleThreads) })
	row("goroutines", func(f scaleFigures) string { return fmtInt(f.EmptyGoroutines) }, func(f scaleFigures) string { return fmtInt(f.IdleGoroutines) })
	row("open fds", func(f scaleFigures) string { return fmtInt(f.EmptyFDs) }, func(f scaleFigures) string { return fmtInt(f.IdleFDs) })
	row("disk MiB", func(f scaleFigures) string { return fmtKiBAsMiB(f.EmptyDiskKiB) }, func(f scaleFigures) string { return fmtKiBAsMiB(f.IdleDiskKiB) })
	row("idle CPU % of a core", func(f scaleFigures) string { return fmtFloat(f.EmptyCPUPercent, 1) }, func(f scaleFigures) string { return fmtFloat(f.IdleCPUPercent, 1) })
	row("RSS KiB / replica", dash, func(f scaleFigures) string { return fmtFloat(f.RSSKiBPerReplica, 1) })
	row("goroutines / replica", dash, func(f scaleFigures) string { return fmtFloat(f.GoroutinesPerReplica, 2) })
	row("fds / replica", dash, func(f scaleFigures) string { return fmtFloat(f.FDsPerReplica, 2) })
	row("disk KiB / partition", dash, func(f scaleFigures) string { return fmtFloat(f.DiskKiBPerPartition, 1) })
	row("killed broker (partitions led)", dash, func(f scaleFigures) string {
		if f.KilledBroker == nil {
			return "-"
		}
		return fmt.Sprintf("%d (%d)", *f.KilledBroker, *f.KilledBrokerLed)
	})
	row("failover: all re-led s", dash, func(f scaleFigures) string { return fmtTime(f.FailoverSeconds, f.FailoverTimeoutSeconds) })
	row("killed broker out of every ISR s", dash, func(f scaleFigures) string { return fmtTime(f.OutSeconds, f.OutTimeoutSeconds) })
	row("rejoin: every ISR full s", dash, func(f scaleFigures) string { return fmtTime(f.RecoverSeconds, f.RecoverTimeoutSeconds) })
	if err := t.Write(w); err != nil {
		return err
	}
	for _, r := range s.Runs {
		if r.Create != nil && r.Create.CreateError != "" {
			fmt.Fprintf(w, "%d partitions: CreateTopics failed after %.1fs: %s\n", r.Partitions, r.Create.CreateSeconds, r.Create.CreateError)
		}
		if r.Create != nil && !r.Create.Settled {
			fmt.Fprintf(w, "%d partitions: %d of %d partitions still without a leader or a full ISR after %gs; per-replica figures count all %d replicas asked for\n",
				r.Partitions, r.Create.Pending, r.Create.Partitions, r.Create.SettleTimeoutSeconds, r.Figures.Replicas)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "%d partitions: %s\n", r.Partitions, n)
		}
	}
	if p := s.Produce; p != nil {
		fmt.Fprintf(w, "produce: %d producers, %d records, %.2f MB/s, %.0f records/s over %.2fs (slowest producer), max p99 %.1f ms, %d errors",
			p.Producers, p.Records, p.MBPerSec, p.RecordsPerSec, p.Seconds, p.MaxP99Ms, p.Errors)
		if !p.Complete || slices.Contains(p.Stopped, harness.StopDuration) {
			fmt.Fprintf(w, "; stopped by: %s", strings.Join(p.Stopped, ","))
		}
		if !p.Complete {
			fmt.Fprint(w, " (INCOMPLETE: not compared)")
		}
		fmt.Fprintln(w)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func (rep *scaleReport) writeComparison(w io.Writer) error {
	var ran []string
	for _, s := range rep.Systems {
		if s.Skipped == "" {
			ran = append(ran, s.Name)
		}
	}
	pairs := ratioPairs(rep.Systems)
	if len(ran) == 0 {
		return nil
	}
	fmt.Fprintln(w, "== side by side")
	headers := []string{"FIGURE", "PARTITIONS"}
	for _, n := range ran {
		headers = append(headers, strings.ToUpper(n))
	}
	for _, p := range pairs {
		headers = append(headers, strings.ToUpper(p[0]+"/"+p[1]))
	}
	t := cli.NewTable(headers...)
	prec := map[string]int{}
	for _, m := range scaleMetrics() {
		prec[m.name] = m.prec
	}
	for _, c := range rep.Comparisons {
		n := "-"
		if c.Partitions > 0 {
			n = strconv.Itoa(c.Partitions)
		}
		cells := []any{c.Metric, n}
		for _, s := range ran {
			cells = append(cells, fmtFloat(c.Values[s], prec[c.Metric]))
		}
		for _, p := range pairs {
			r := c.Ratios[p[0]+"/"+p[1]]
			cells = append(cells, fmtRatio(r))
		}
		t.Row(cells...)
	}
	if err := t.Write(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "(- : not measured or not reached within its bound; see the tables above. Ratios > 1 mean more time, memory, files or disk, or more throughput.)")
	return nil
}

func fmtTime(v *float64, limit float64) string {
	if v == nil {
		if limit > 0 {
			return fmt.Sprintf("> %g", limit)
		}
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

func fmtRatio(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r, 'f', 2, 64) + "x"
}

// readJSONIfPresent decodes path into into (a pointer to a pointer),
// leaving it nil when the file does not exist or is empty: a measurement
// the script could not take.
func readJSONIfPresent(path string, into any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func scaleReadLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}
