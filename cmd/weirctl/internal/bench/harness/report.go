package harness

import (
	"fmt"
	"math"
	"strconv"
)

// NotAvailable fills a cell whose figure could not be computed.
const NotAvailable = "n/a"

// FloatCell shows a figure that may be missing.
func FloatCell(v *float64, decimals int) string {
	if v == nil {
		return NotAvailable
	}
	return strconv.FormatFloat(*v, 'f', decimals, 64)
}

// MiBCell shows bytes in MiB; n/a when absent.
func MiBCell(v *int64) string {
	if v == nil {
		return NotAvailable
	}
	return fmt.Sprintf("%.1f MiB", float64(*v)/(1<<20))
}

// RoundCount turns the change of a Prometheus counter, a float, into a
// count; a change below zero counts as none.
func RoundCount(v float64) uint64 { return uint64(math.Round(max(v, 0))) }
