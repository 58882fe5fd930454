package harness

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func msList(vals ...int) []time.Duration {
	out := make([]time.Duration, len(vals))
	for i, v := range vals {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestPercentilesOneToHundred(t *testing.T) {
	d := make([]time.Duration, 0, 100)
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	rand.Shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
	p := ComputePercentiles(d)
	if p.P50 != 50*time.Millisecond || p.P95 != 95*time.Millisecond || p.P99 != 99*time.Millisecond || p.P999 != 100*time.Millisecond || p.Max != 100*time.Millisecond {
		t.Errorf("got %+v", p)
	}
}

func TestPercentileP999(t *testing.T) {
	d := make([]time.Duration, 0, 2000)
	for i := 1; i <= 2000; i++ {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	rand.Shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
	p := ComputePercentiles(d)
	// Nearest rank: ceil(0.999*2000) = 1998.
	if p.P99 != 1980*time.Microsecond || p.P999 != 1998*time.Microsecond || p.Max != 2000*time.Microsecond {
		t.Errorf("got %+v", p)
	}
	s := NewSummary("produce", "t", 2000, 2000, 0, time.Second, d)
	if s.P999Ms != 1.998 {
		t.Errorf("summary p99.9: %v", s.P999Ms)
	}
}

func TestPercentilesNearestRank(t *testing.T) {
	for _, tc := range []struct {
		in                  []time.Duration
		p50, p95, p99, pmax int
	}{
		{msList(7), 7, 7, 7, 7},
		{msList(1, 2), 1, 2, 2, 2},
		{msList(5, 1, 3), 3, 5, 5, 5},
		// A single outlier among 200 samples shows up at max, not p99.
		{append(slices.Repeat(msList(1), 199), 1000*time.Millisecond), 1, 1, 1, 1000},
	} {
		p := ComputePercentiles(tc.in)
		got := []time.Duration{p.P50, p.P95, p.P99, p.Max}
		want := msList(tc.p50, tc.p95, tc.p99, tc.pmax)
		if !slices.Equal(got, want) {
			t.Errorf("%d samples: got %v, want %v", len(tc.in), got, want)
		}
	}
	if p := ComputePercentiles(nil); p != (Percentiles{}) {
		t.Errorf("empty: %+v", p)
	}
}

// TestSummaryYAMLMatchesJSON checks that the summary prints the same
// document in both formats.
func TestSummaryYAMLMatchesJSON(t *testing.T) {
	lat := []time.Duration{time.Millisecond, 3 * time.Millisecond}
	s := NewSummary("produce", "t", 2, 2048, 0, time.Second, lat)
	var js, ys bytes.Buffer
	if err := s.Write(&js, cli.FormatJSON); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(&ys, cli.FormatYAML); err != nil {
		t.Fatal(err)
	}
	if got, want := clitest.YAMLAsJSON(t, ys.Bytes()), clitest.CompactJSON(t, js.Bytes()); got != want {
		t.Errorf("YAML differs from JSON:\n%s\n%s", got, want)
	}
}

func TestBenchSummaryOutput(t *testing.T) {
	lat := []time.Duration{4 * time.Millisecond, 1 * time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
	s := NewSummary("produce", "t", 4, 4*BytesPerMB, 0, 2*time.Second, lat)
	s.Stopped = StopRecords
	if s.RecordsPerSec != 2 || s.MBPerSec != 2 || s.P50Ms != 2 || s.MaxMs != 4 {
		t.Errorf("summary math: %+v", s)
	}

	var buf bytes.Buffer
	if err := s.Write(&buf, cli.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"records", "bytes", "seconds", "records_per_sec", "mb_per_sec", "p50_ms", "p95_ms", "p99_ms", "max_ms"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON summary lacks %q: %s", k, buf.String())
		}
	}

	buf.Reset()
	if err := s.Write(&buf, cli.FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RECORDS/SEC", "MB/SEC", "P99 MS", "STOPPED"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestSummaryWithoutTime(t *testing.T) {
	s := NewSummary("consume", "t", 0, 0, 0, 0, nil)
	if s.RecordsPerSec != 0 || s.MBPerSec != 0 || s.MaxMs != 0 {
		t.Errorf("zero run must not divide by zero: %+v", s)
	}
}
