package broker

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/log"
)

// registerPageCacheMetrics reports what the segments' page-cache budget
// (log_page_cache_bytes) holds and has dropped, read at scrape time. A
// failure is logged: the budget works as well without its metrics.
func registerPageCacheMetrics(reg prometheus.Registerer, pc *log.PageCache, logger *slog.Logger) {
	for _, m := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weir_log_page_cache_held_bytes",
			Help: "Bytes of the newest segment appends counted against log_page_cache_bytes (kept in the page cache)."},
			func() float64 { return float64(pc.Stats().Held) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weir_log_page_cache_dropped_bytes_total",
			Help: "Bytes of older segment appends dropped from the page cache to keep within log_page_cache_bytes."},
			func() float64 { return float64(pc.Stats().Dropped) }),
	} {
		if err := reg.Register(m); err != nil {
			logger.Warn("registering page cache metrics", "err", err)
		}
	}
}
