package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
)

// Broker is one entry of GET /v1/brokers.
type Broker struct {
	NodeID    int32  `json:"node_id"`
	KafkaAddr string `json:"kafka_addr"`
	AdminAddr string `json:"admin_addr"`
	Rack      string `json:"rack"`
	IsAlive   bool   `json:"is_alive"`
}

// ListBrokers asks one broker's admin API for every registered broker,
// in node id order.
func (c *Client) ListBrokers(ctx context.Context) ([]Broker, error) {
	var brokers []Broker
	if err := c.Do(ctx, http.MethodGet, "/v1/brokers", nil, &brokers); err != nil {
		return nil, fmt.Errorf("listing brokers at %s: %w", c.base, err)
	}
	slices.SortFunc(brokers, func(a, b Broker) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return brokers, nil
}

// errNoAdminAddr is a broker that registered without an admin address
// (one that predates admin_addr in registrations).
var errNoAdminAddr = errors.New("unreachable: the broker registered no admin_addr")

// forBroker returns a client for b's own admin API. It keeps c's scheme
// (a cluster behind TLS uses it everywhere) and HTTP client (and so
// --timeout). admin_addr is the address the broker listens on, so a
// wildcard host (0.0.0.0, ::, empty) is replaced by the host of its
// kafka_addr, then by the host c talks to.
func (c *Client) forBroker(b Broker) (*Client, error) {
	if b.AdminAddr == "" {
		return nil, errNoAdminAddr
	}
	host, port, err := net.SplitHostPort(b.AdminAddr)
	if err != nil {
		return nil, fmt.Errorf("unreachable: admin_addr %q: %w", b.AdminAddr, err)
	}
	base, err := url.Parse(c.base)
	if err != nil {
		return nil, fmt.Errorf("admin URL %q: %w", c.base, err)
	}
	if isWildcardHost(host) {
		host = base.Hostname()
		if kh, _, err := net.SplitHostPort(b.KafkaAddr); err == nil && !isWildcardHost(kh) {
			host = kh
		}
	}
	return &Client{base: base.Scheme + "://" + net.JoinHostPort(host, port), http: c.http}, nil
}

func isWildcardHost(h string) bool {
	if h == "" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsUnspecified()
}

// ErrBrokerNotAlive is a broker the cluster reports as down; it is not
// asked, since that could only wait for a timeout.
var ErrBrokerNotAlive = errors.New("not alive (not asked)")

// BrokerScrape is one broker's /metrics, or why there is none.
type BrokerScrape struct {
	Broker  Broker
	Metrics MetricFamilies
	Err     error
}

// ScrapeBrokers scrapes every live broker concurrently; each scrape is
// bounded by the admin client's timeout. Dead brokers are not asked, and
// come back with an error saying so. The result is in brokers' order.
func (c *Client) ScrapeBrokers(ctx context.Context, brokers []Broker) []BrokerScrape {
	out := make([]BrokerScrape, len(brokers))
	var wg sync.WaitGroup
	for i, b := range brokers {
		out[i].Broker = b
		if !b.IsAlive {
			out[i].Err = ErrBrokerNotAlive
			continue
		}
		bc, err := c.forBroker(b)
		if err != nil {
			out[i].Err = err
			continue
		}
		wg.Go(func() { out[i].Metrics, out[i].Err = bc.ScrapeMetrics(ctx) })
	}
	wg.Wait()
	return out
}
