package harness

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// BytesPerMB follows kafka-producer-perf-test, which divides by 2^20, so
// numbers can be compared with what people already measured on Kafka.
const BytesPerMB = 1 << 20

// Summary is the result of a run; field names are a stable contract
// for scripts reading --format json.
type Summary struct {
	Mode          string  `json:"mode"`
	Topic         string  `json:"topic"`
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Errors        int64   `json:"errors"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P95Ms         float64 `json:"p95_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`
	MaxMs         float64 `json:"max_ms"`
	Stopped       string  `json:"stopped"`
}

// NewSummary derives the rates and latency percentiles of a run from its
// totals and latencies, which it sorts.
func NewSummary(mode, topic string, records, bytes, errs int64, elapsed time.Duration, lat []time.Duration) Summary {
	s := Summary{Mode: mode, Topic: topic, Records: records, Bytes: bytes, Errors: errs, Seconds: elapsed.Seconds()}
	if s.Seconds > 0 {
		s.RecordsPerSec = float64(records) / s.Seconds
		s.MBPerSec = float64(bytes) / BytesPerMB / s.Seconds
	}
	p := ComputePercentiles(lat)
	s.P50Ms, s.P95Ms, s.P99Ms, s.P999Ms, s.MaxMs = Milliseconds(p.P50), Milliseconds(p.P95), Milliseconds(p.P99), Milliseconds(p.P999), Milliseconds(p.Max)
	return s
}

// Milliseconds is how summaries show a duration: fractional milliseconds.
func Milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Write prints the summary as a two-column table, or as one JSON or YAML
// document.
func (s Summary) Write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, s)
	}
	t := cli.NewTable()
	t.Row("MODE", s.Mode)
	t.Row("TOPIC", s.Topic)
	t.Row("RECORDS", s.Records)
	t.Row("BYTES", s.Bytes)
	t.Row("ERRORS", s.Errors)
	t.Row("SECONDS", fmt.Sprintf("%.3f", s.Seconds))
	t.Row("RECORDS/SEC", fmt.Sprintf("%.0f", s.RecordsPerSec))
	t.Row("MB/SEC", fmt.Sprintf("%.2f", s.MBPerSec))
	t.Row("P50 MS", fmt.Sprintf("%.3f", s.P50Ms))
	t.Row("P95 MS", fmt.Sprintf("%.3f", s.P95Ms))
	t.Row("P99 MS", fmt.Sprintf("%.3f", s.P99Ms))
	t.Row("P99.9 MS", fmt.Sprintf("%.3f", s.P999Ms))
	t.Row("MAX MS", fmt.Sprintf("%.3f", s.MaxMs))
	t.Row("STOPPED", s.Stopped)
	return t.Write(w)
}

// Percentiles are the latencies a summary reports.
type Percentiles struct{ P50, P95, P99, P999, Max time.Duration }

// ComputePercentiles uses the nearest-rank method: every reported value is a
// latency that was actually observed, which interpolation would not
// guarantee. It sorts its argument in place.
func ComputePercentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	slices.Sort(d)
	return Percentiles{
		P50:  nearestRank(d, 0.50),
		P95:  nearestRank(d, 0.95),
		P99:  nearestRank(d, 0.99),
		P999: nearestRank(d, 0.999),
		Max:  d[len(d)-1],
	}
}

func nearestRank(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}
