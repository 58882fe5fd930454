package soak

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// line returns n points a second apart of v(i).
func line(n int, v func(i int) float64) []growthPoint {
	pts := make([]growthPoint, n)
	for i := range pts {
		pts[i] = growthPoint{at: float64(i), v: v(i)}
	}
	return pts
}

func TestCheckGrowth(t *testing.T) {
	// Rising 2 a second from 1000: the slope is 120 a minute exactly,
	// and the last third (mean 1000+2*9.5) exceeds the first (1000+2*1.5)
	// by 16, more than the 1% tolerance (10.03) and the floor (5).
	c := checkGrowth("goroutines", "count", line(12, func(i int) float64 { return 1000 + 2*float64(i) }), 0.01, 5)
	if !c.Judged || !c.Grew || math.Abs(c.SlopePerMinute-120) > 1e-9 || c.FirstThird != 1003 || c.LastThird != 1019 || c.Allowed != 10.03 {
		t.Errorf("rising: %+v", c)
	}
	// The same rise under a 10% tolerance is no growth.
	if c := checkGrowth("goroutines", "count", line(12, func(i int) float64 { return 1000 + 2*float64(i) }), 0.10, 5); c.Grew {
		t.Errorf("within tolerance: %+v", c)
	}
	// A large relative rise of a small series stays under the floor.
	if c := checkGrowth("heap", "bytes", line(9, func(i int) float64 { return 100 + 10*float64(i) }), 0.10, 1000); c.Grew || c.Allowed != 1000 {
		t.Errorf("under the floor: %+v", c)
	}
	// Noise around a level: no growth, whatever the order.
	rng := rand.New(rand.NewPCG(1, 2))
	noisy := line(30, func(int) float64 { return 500 + 20*rng.Float64() })
	if c := checkGrowth("rss", "bytes", noisy, 0.10, 0); c.Grew {
		t.Errorf("noise: %+v", c)
	}
	// Falling: the last third is lower.
	if c := checkGrowth("rss", "bytes", line(9, func(i int) float64 { return 900 - 50*float64(i) }), 0.10, 0); c.Grew || c.Change >= 0 || c.SlopePerMinute >= 0 {
		t.Errorf("falling: %+v", c)
	}
	// The last third above the first, but a falling trend over all the
	// samples (a peak early, in the first third and the middle): the
	// slope must agree before it is growth.
	peak := []growthPoint{{0, 2000}, {1, 100}, {2, 100}, {3, 1500}, {4, 1500}, {5, 1500}, {6, 900}, {7, 900}, {8, 900}}
	if c := checkGrowth("x", "count", peak, 0.10, 0); c.LastThird <= c.FirstThird*1.1 || c.SlopePerMinute >= 0 || c.Grew {
		t.Errorf("falling trend, thirds apart: %+v", c)
	}
	// Too few points to have thirds.
	if c := checkGrowth("x", "count", line(2, func(i int) float64 { return float64(i) }), 0.1, 0); c.Judged || c.Grew || c.Samples != 2 {
		t.Errorf("two points: %+v", c)
	}
	if s := leastSquaresSlope([]growthPoint{{5, 1}, {5, 9}}); s != 0 {
		t.Errorf("points at one time: slope %v", s)
	}
}

func TestSoakVerdict(t *testing.T) {
	ok := growthCheck{Series: "rss", Judged: true}
	grew := growthCheck{Series: "goroutines", Judged: true, Grew: true}
	unjudged := growthCheck{Series: "heap_live"}
	for _, tc := range []struct {
		checks []growthCheck
		want   string
	}{
		{[]growthCheck{ok, ok}, "no growth"},
		{[]growthCheck{ok, grew, {Series: "connections", Judged: true, Grew: true}}, "grew: goroutines, connections"},
		{[]growthCheck{ok, unjudged}, "inconclusive: too few samples of heap_live"},
		{[]growthCheck{grew, unjudged}, "grew: goroutines"},
	} {
		if got := soakVerdict(tc.checks); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func i64(v int64) *int64 { return &v }

func TestAssignPhasesAndGrowthChecks(t *testing.T) {
	var samples []soakSample
	for i := range 11 {
		// Heap in use swings; it is shown, not judged.
		s := soakSample{Seconds: float64(10 * (i + 1)), RSSBytes: i64(100 << 20), HeapInUseBytes: i64(int64(i) << 30), HeapLiveBytes: i64(50 << 20),
			Goroutines: i64(1000 + 100*int64(i)), Connections: i64(2000)}
		if i == 5 {
			s.RSSBytes = nil // a failed scrape
		}
		samples = append(samples, s)
	}
	// Warm-up ends at 20s: samples at 10s are warm-up, the 10 from 20s
	// are split 3, 4, 3.
	assignPhases(samples, 20*time.Second)
	var phases []string
	for _, s := range samples {
		phases = append(phases, s.Phase)
	}
	want := []string{"warmup", "first", "first", "first", "middle", "middle", "middle", "middle", "last", "last", "last"}
	if !slices.Equal(phases, want) {
		t.Fatalf("phases: %v", phases)
	}
	checks := growthChecks(samples, 0.10)
	by := map[string]growthCheck{}
	for _, c := range checks {
		by[c.Series] = c
	}
	if c := by[seriesRSS]; c.Samples != 9 || c.Grew {
		t.Errorf("rss (one sample missing): %+v", c)
	}
	if c := by[seriesGoroutines]; c.Samples != 10 || !c.Grew || c.FirstThird != 1200 {
		t.Errorf("goroutines (warm-up left out): %+v", c)
	}
	if c := by[seriesHeapLive]; c.Grew || !c.Judged || len(checks) != 4 {
		t.Errorf("heap: %+v", c)
	}
	if soakVerdict(checks) != "grew: goroutines" {
		t.Errorf("verdict %q", soakVerdict(checks))
	}
}
