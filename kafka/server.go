package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/memory"
	"github.com/weir-broker/weir/config"
)

// Options configure a Server.
type Options struct {
	// MaxRequestBytes is socket.request.max.bytes: a larger size prefix
	// closes the connection before anything is allocated.
	MaxRequestBytes int32
	// QueuedMaxRequestBytes bounds the bytes of requests read and not yet
	// answered, over all connections (queued.max.request.bytes); 0 means
	// 256 MiB. A request larger than it closes its connection.
	QueuedMaxRequestBytes int64
	// ConnectionMaxUnwrittenBytes caps one connection's fetch responses
	// (max_bytes), so that a client that stops reading holds at most this
	// much of the fetch budget; 0 means 32 MiB.
	ConnectionMaxUnwrittenBytes int64
	// ConnectionMaxInflightRequests is how many requests a connection may
	// have read and not yet answered (at least 2); 0 means 6.
	ConnectionMaxInflightRequests int
	// SASLMechanisms and AdvertisedAddr describe the listener Serve
	// serves: SASL_PLAINTEXT with these mechanisms (PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512) when set, else PLAINTEXT, advertised at
	// AdvertisedAddr. ServeListener takes its listener's own.
	SASLMechanisms []string
	AdvertisedAddr string
	// TLSReloadInterval is how often SSL and SASL_SSL listeners look for
	// replaced certificate files; 0 means config.DefaultTLSReloadInterval.
	TLSReloadInterval time.Duration
	// TLSHandshakeTimeout bounds a TLS connection's handshake; 0 means
	// DefaultTLSHandshakeTimeout.
	TLSHandshakeTimeout time.Duration
	Logger              *slog.Logger
	// Registerer receives the protocol metrics; nil disables them.
	Registerer prometheus.Registerer
}

// DefaultQueuedMaxRequestBytes is Options.QueuedMaxRequestBytes' default.
const DefaultQueuedMaxRequestBytes = config.DefaultQueuedMaxRequestBytes

// Server serves the Kafka protocol for one broker.
type Server struct {
	domain
	opts    Options
	logger  *slog.Logger
	apis    apiTable
	metrics *metrics
	quota   *quotaManager // client quotas (quota.go)
	// fetchSessions are this broker's KIP-227 fetch sessions
	// (fetch_session.go).
	fetchSessions *fetchSessionCache
	pool          *memory.Pool // queued_max_request_bytes
	frames        framePool
	// saslDecoyKey keys the fake salts unknown SCRAM users are shown.
	saslDecoyKey [32]byte

	// optionsListener is the listener Options describes, which Serve
	// serves.
	optionsListener *Listener
	// reloads lives until Close: the listeners reload their
	// certificates until it ends.
	reloads     context.Context
	stopReloads context.CancelFunc

	mu     sync.Mutex
	lns    []net.Listener
	conns  map[*clientConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer builds a server for b.
func NewServer(b *broker.Broker, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 100 << 20
	}
	if opts.ConnectionMaxUnwrittenBytes <= 0 {
		opts.ConnectionMaxUnwrittenBytes = 32 << 20
	}
	if opts.ConnectionMaxInflightRequests < 2 {
		opts.ConnectionMaxInflightRequests = 6
	}
	if opts.QueuedMaxRequestBytes <= 0 {
		opts.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if opts.TLSHandshakeTimeout <= 0 {
		opts.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if opts.AdvertisedAddr != "" {
		if _, _, err := net.SplitHostPort(opts.AdvertisedAddr); err != nil {
			return nil, fmt.Errorf("advertised address %q: %w", opts.AdvertisedAddr, err)
		}
	}
	s := &Server{domain: domainOf(b), opts: opts, logger: opts.Logger, conns: map[*clientConn]struct{}{},
		pool: memory.NewPool(opts.QueuedMaxRequestBytes), saslDecoyKey: newDecoyKey()}
	s.reloads, s.stopReloads = context.WithCancel(context.Background())
	s.optionsListener = listenerOfOptions(opts)
	s.fetchSessions = newFetchSessionCache(func() int {
		return int(s.props.Properties().Int("max_incremental_fetch_session_cache_slots"))
	}, fetchSessionEviction, time.Now)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.fetchSessions.run(s.reloads, 10*time.Second)
	}()
	m, err := newMetrics(opts.Registerer, s.topics, s.pool, s.fetchSessions)
	if err != nil {
		s.stopReloads()
		return nil, err
	}
	s.metrics = m
	s.quota = newQuotaManager(s.domain.quotas, time.Now, m.quota)
	s.apis = s.newAPITable()
	for i := range s.apis {
		if a := &s.apis[i]; a.name != "" {
			a.requests = m.requests.WithLabelValues(a.name)
			a.latency = m.latency.WithLabelValues(a.name)
		}
	}
	return s, nil
}

// RequestMemoryStats reports the pool of requests read and not yet
// answered (queued_max_request_bytes).
func (s *Server) RequestMemoryStats() memory.Stats { return s.pool.Stats() }

// Serve accepts connections on ln until Close, as the listener Options
// describes (Options.AdvertisedAddr is then required).
func (s *Server) Serve(ln net.Listener) error { return s.ServeListener(ln, *s.optionsListener) }

// ServeListener accepts connections on ln until Close, served as l says:
// TLS first on SSL and SASL_SSL, SASL before anything else on SASL_*,
// and l's addresses in Metadata and FindCoordinator answers. Call it once
// per listener, each on its own goroutine.
func (s *Server) ServeListener(ln net.Listener, l Listener) error {
	if err := l.check(); err != nil {
		ln.Close()
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.lns = append(s.lns, ln)
	if l.TLS != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			l.TLS.Run(s.reloads, s.opts.TLSReloadInterval)
		}()
	}
	s.mu.Unlock()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors and the like: wait and go on
			// rather than spin or stop serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logger.Warn("accept", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if d := s.quota.connectionThrottle(nc.RemoteAddr()); d > 0 {
			s.logger.Debug("closing a connection over its IP's connection_creation_rate", "remote", nc.RemoteAddr().String(), "after", d)
			time.AfterFunc(d, func() { nc.Close() })
			continue
		}
		c := newListenerConn(s, nc, &l)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.metrics.connections.Inc()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.metrics.connections.Dec()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection and waits for their
// handlers, up to ctx.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.stopReloads()
	for _, ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
