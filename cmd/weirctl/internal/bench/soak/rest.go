package soak

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
)

// soakRest is the brokers' goroutines and connections, summed, while
// none of the soak's load is connected.
type soakRest struct {
	Goroutines  int64 `json:"goroutines"`
	Connections int64 `json:"connections"`
}

// readRest scrapes every broker for its goroutines and connections.
func (b *soakBench) readRest(ctx context.Context) (soakRest, error) {
	var r soakRest
	for _, sc := range b.admin.ScrapeBrokers(ctx, b.brokers) {
		if sc.Err != nil {
			return r, fmt.Errorf("broker %d: %w", sc.Broker.NodeID, sc.Err)
		}
		rd := readSoakBroker(sc.Broker.NodeID, sc.Metrics)
		if rd.Goroutines == nil || rd.Connections == nil {
			return r, fmt.Errorf("broker %d exports no %s or %s", sc.Broker.NodeID, admin.MetricGoroutines, metricKafkaConnections)
		}
		r.Goroutines += *rd.Goroutines
		r.Connections += *rd.Connections
	}
	return r, nil
}

// atRest reads the brokers once the topics have their leaders and
// before any load connects: the baseline that what the soak leaves
// behind is measured against.
func (b *soakBench) atRest(ctx context.Context) (soakRest, error) {
	r, err := b.readRest(ctx)
	if err != nil {
		return r, fmt.Errorf("reading the brokers at rest before the soak: %w", err)
	}
	return r, nil
}

// soakRestSettle is how long the brokers get, once their connection
// count is back to the baseline, for the goroutines of those
// connections to end.
const soakRestSettle = time.Second

// backAtRest waits until the brokers hold no more connections than
// before the soak (a long poll on a connection the client closed can
// keep it for its max_wait), then reads them again. The wait is bounded
// by --connection-fetch-wait and --timeout; a broker still holding more
// connections after it is reported as it is.
func (b *soakBench) backAtRest(ctx context.Context, before soakRest) (soakRest, error) {
	deadline := time.Now().Add(b.o.connWait + b.g.Timeout)
	for {
		r, err := b.readRest(ctx)
		if err != nil {
			return r, fmt.Errorf("reading the brokers at rest after the soak: %w", err)
		}
		if r.Connections <= before.Connections || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return r, nil
		case <-time.After(soakPoll):
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(soakRestSettle):
	}
	r, err := b.readRest(ctx)
	if err != nil {
		return r, fmt.Errorf("reading the brokers at rest after the soak: %w", err)
	}
	return r, nil
}
