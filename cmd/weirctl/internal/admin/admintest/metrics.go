package admintest

import (
	"testing"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
)

// ParseMetricsText parses a /metrics page in the Prometheus text
// format, failing the test if it does not parse.
func ParseMetricsText(t *testing.T, text string) admin.MetricFamilies {
	t.Helper()
	fams, err := admin.ParseMetrics("text/plain; version=0.0.4", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}
