package soak

import (
	"fmt"
	"strings"
)

// The series growth is judged on, as named in the verdict and the JSON.
const (
	seriesRSS         = "rss"
	seriesHeapLive    = "heap_live"
	seriesGoroutines  = "goroutines"
	seriesConnections = "connections"
)

// growthFloor is the least increase, per series, that counts as growth
// however small the series: a broker at rest has few goroutines and a
// small heap, and a fixed percentage of little is noise.
func growthFloor(series string) float64 {
	switch series {
	case seriesRSS, seriesHeapLive:
		return 16 << 20
	case seriesGoroutines:
		return 50
	default:
		return 20
	}
}

// Phases of a sample: before the end of warm-up, then the thirds of the
// samples after it that the verdict compares.
const (
	phaseWarmup = "warmup"
	phaseFirst  = "first"
	phaseMiddle = "middle"
	phaseLast   = "last"
)

// thirdSize is how many samples each of the first and last thirds of n
// holds; the middle takes what is left.
func thirdSize(n int) int { return n / 3 }

// phaseOf names the phase of the i-th of n samples after warm-up.
func phaseOf(i, n int) string {
	k := thirdSize(n)
	switch {
	case i < k:
		return phaseFirst
	case i >= n-k:
		return phaseLast
	}
	return phaseMiddle
}

// growthPoint is one reading of a series: seconds since the start.
type growthPoint struct {
	at, v float64
}

// growthCheck is the verdict on one series after warm-up.
type growthCheck struct {
	Series string `json:"series"`
	// Unit is bytes or count.
	Unit    string `json:"unit"`
	Samples int    `json:"samples"`
	// Judged is false when too few samples had the series.
	Judged     bool    `json:"judged"`
	FirstThird float64 `json:"first_third_mean"`
	LastThird  float64 `json:"last_third_mean"`
	// Change is (last - first) / first; 0 when first is 0.
	Change float64 `json:"change"`
	// SlopePerMinute is the least-squares slope over every sample after
	// warm-up, in the series' unit per minute.
	SlopePerMinute float64 `json:"slope_per_minute"`
	// Allowed is the increase of the last third's mean over the first
	// third's that is tolerated: the tolerance or the floor, whichever
	// is larger.
	Allowed float64 `json:"allowed_increase"`
	Grew    bool    `json:"grew"`
}

// checkGrowth compares the mean of the last third of pts with the mean of
// the first third. A series grew when that increase exceeds tolerance
// (a fraction of the first third's mean) and floor, and its slope over
// all of pts is positive: the thirds measure how much it rose, and the
// line fitted to every sample must agree that it rose.
func checkGrowth(series, unit string, pts []growthPoint, tolerance, floor float64) growthCheck {
	c := growthCheck{Series: series, Unit: unit, Samples: len(pts)}
	if len(pts) < soakMinJudged {
		return c
	}
	c.Judged = true
	k := thirdSize(len(pts))
	c.FirstThird = meanOf(pts[:k])
	c.LastThird = meanOf(pts[len(pts)-k:])
	if c.FirstThird != 0 {
		c.Change = (c.LastThird - c.FirstThird) / c.FirstThird
	}
	c.SlopePerMinute = 60 * leastSquaresSlope(pts)
	c.Allowed = max(tolerance*c.FirstThird, floor)
	c.Grew = c.LastThird-c.FirstThird > c.Allowed && c.SlopePerMinute > 0
	return c
}

func meanOf(pts []growthPoint) float64 {
	var sum float64
	for _, p := range pts {
		sum += p.v
	}
	return sum / float64(len(pts))
}

// leastSquaresSlope is the slope of the line fitted to pts, in value per
// second; 0 when every point is at the same time.
func leastSquaresSlope(pts []growthPoint) float64 {
	n := float64(len(pts))
	var sx, sy float64
	for _, p := range pts {
		sx += p.at
		sy += p.v
	}
	mx, my := sx/n, sy/n
	var num, den float64
	for _, p := range pts {
		num += (p.at - mx) * (p.v - my)
		den += (p.at - mx) * (p.at - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// soakVerdict sums the checks up: "no growth", which series grew, or
// why growth could not be judged.
func soakVerdict(checks []growthCheck) string {
	var grew, unjudged []string
	for _, c := range checks {
		switch {
		case !c.Judged:
			unjudged = append(unjudged, c.Series)
		case c.Grew:
			grew = append(grew, c.Series)
		}
	}
	switch {
	case len(grew) > 0:
		return "grew: " + strings.Join(grew, ", ")
	case len(unjudged) > 0:
		return "inconclusive: too few samples of " + strings.Join(unjudged, ", ")
	}
	return verdictNoGrowth
}

const verdictNoGrowth = "no growth"

// growthChecks judges every series over the samples after warm-up. The
// heap is judged by its live size (heapLive), not by heap in use, whose
// swings with each garbage collection are larger than the tolerance.
func growthChecks(samples []soakSample, tolerance float64) []growthCheck {
	series := []struct {
		name, unit string
		get        func(soakSample) *int64
	}{
		{seriesRSS, "bytes", func(s soakSample) *int64 { return s.RSSBytes }},
		{seriesHeapLive, "bytes", func(s soakSample) *int64 { return s.HeapLiveBytes }},
		{seriesGoroutines, "count", func(s soakSample) *int64 { return s.Goroutines }},
		{seriesConnections, "count", func(s soakSample) *int64 { return s.Connections }},
	}
	out := make([]growthCheck, 0, len(series))
	for _, se := range series {
		var pts []growthPoint
		for _, s := range samples {
			if v := se.get(s); s.Phase != phaseWarmup && v != nil {
				pts = append(pts, growthPoint{at: s.Seconds, v: float64(*v)})
			}
		}
		out = append(out, checkGrowth(se.name, se.unit, pts, tolerance, growthFloor(se.name)))
	}
	return out
}

// describe is one line for the verdict table's last column.
func (c growthCheck) describe() string {
	switch {
	case !c.Judged:
		return fmt.Sprintf("not judged: %d samples after warm-up, need %d", c.Samples, soakMinJudged)
	case c.Grew:
		return fmt.Sprintf("GREW by more than %s", c.amount(c.Allowed))
	}
	return verdictNoGrowth
}

// amount renders a value of the series in its unit.
func (c growthCheck) amount(v float64) string {
	if c.Unit == "bytes" {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}
