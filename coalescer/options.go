package coalescer

import (
	"fmt"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults applied to zero-valued Options fields.
const (
	DefaultIndexBytes = 512 << 10
	DefaultRetainFor  = 2 * time.Second
)

// Options configures a Coalescer. The zero value is valid: every zero field
// takes its default.
type Options struct {
	// Shards is the number of shards; default runtime.GOMAXPROCS(0).
	Shards int
	// IndexBytes is the size of each shard's cache index while enabled;
	// default 512 KiB. It is rounded down to whole buckets, with at least
	// one bucket.
	IndexBytes int
	// Registerer, when non-nil, receives the coalescer's metrics; Close
	// unregisters them.
	Registerer prometheus.Registerer
	// Free, when set, is called with a result's Data once its last
	// reference is released, and with data that a read returned but no
	// caller took (an error, or every waiter gone), so buffers can return
	// to a pool. It is never called with nil.
	Free func([]byte)
	// Enabled is the initial state; SetEnabled changes it later.
	Enabled bool
	// Within, when set, enables range hits: a read that finds no result
	// of its own key may be answered with part of a recent result of the
	// same partition and isolation level. Within reports where, inside
	// that result's data, lie exactly the bytes a read of key bounded by
	// upTo would return (log.Within), or false.
	Within func(data []byte, key Key, upTo int64) (start, end int, ok bool)
	// RetainBytes, when positive, keeps the newest results findable after
	// their fetches released them, up to this many bytes of their
	// buffers and for at most RetainFor (the oldest go first; Shed lets
	// them go sooner, Expire once they aged). 0 keeps a result only while
	// a fetch holds it.
	RetainBytes int64
	// RetainFor bounds how long a result is retained; default 2 s.
	RetainFor time.Duration
}

// withDefaults validates o and fills in its zero fields.
func (o Options) withDefaults() (Options, error) {
	for _, f := range []struct {
		name  string
		value int
	}{
		{"Shards", o.Shards},
		{"IndexBytes", o.IndexBytes},
		{"RetainBytes", int(min(o.RetainBytes, 1<<40))},
	} {
		if f.value < 0 {
			return o, fmt.Errorf("%w: %s is %d, must not be negative", ErrInvalidOptions, f.name, f.value)
		}
	}
	if o.Shards == 0 {
		o.Shards = runtime.GOMAXPROCS(0)
	}
	if o.IndexBytes == 0 {
		o.IndexBytes = DefaultIndexBytes
	}
	if o.RetainFor <= 0 {
		o.RetainFor = DefaultRetainFor
	}
	return o, nil
}
