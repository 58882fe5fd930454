package memory

import "github.com/prometheus/client_golang/prometheus"

// MetricNames names a pool's series; an empty name leaves that series out.
type MetricNames struct {
	Size, InUse, Peak, Waits, WaitSeconds, Trimmed, Overdraft string
	// What the pool holds, for the help texts ("requests read and not
	// yet answered").
	What string
}

// collector exports one pool's Stats, read at scrape time.
type collector struct {
	pool  *Pool
	descs []*prometheus.Desc
	value []func(Stats) (float64, prometheus.ValueType)
}

// NewCollector exports p's size, use, peak, waits and trims under names.
func NewCollector(p *Pool, names MetricNames) prometheus.Collector {
	c := &collector{pool: p}
	add := func(name, help string, value func(Stats) (float64, prometheus.ValueType)) {
		if name != "" {
			c.descs = append(c.descs, prometheus.NewDesc(name, help, nil, nil))
			c.value = append(c.value, value)
		}
	}
	gauge := func(v int64) (float64, prometheus.ValueType) { return float64(v), prometheus.GaugeValue }
	counter := func(v float64) (float64, prometheus.ValueType) { return v, prometheus.CounterValue }
	add(names.Size, "Size of the memory budget for "+names.What+" (0: unbounded).",
		func(s Stats) (float64, prometheus.ValueType) { return gauge(s.Size) })
	add(names.InUse, "Bytes of "+names.What+" held now.",
		func(s Stats) (float64, prometheus.ValueType) { return gauge(s.Used) })
	add(names.Peak, "Most bytes of "+names.What+" held at once since the broker started.",
		func(s Stats) (float64, prometheus.ValueType) { return gauge(s.Peak) })
	add(names.Waits, "Reservations that waited for the memory budget for "+names.What+".",
		func(s Stats) (float64, prometheus.ValueType) { return counter(float64(s.Waits)) })
	add(names.WaitSeconds, "Seconds spent waiting for the memory budget for "+names.What+", summed over waiters.",
		func(s Stats) (float64, prometheus.ValueType) { return counter(s.Waited.Seconds()) })
	add(names.Trimmed, "Reservations for "+names.What+" granted less than asked because the budget was short.",
		func(s Stats) (float64, prometheus.ValueType) { return counter(float64(s.Trimmed)) })
	add(names.Overdraft, "Bytes of "+names.What+" held past the budget because they had to be (one batch for a consumer to progress).",
		func(s Stats) (float64, prometheus.ValueType) { return counter(float64(s.Overdraw)) })
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stats()
	for i, d := range c.descs {
		v, t := c.value[i](s)
		ch <- prometheus.MustNewConstMetric(d, t, v)
	}
}
