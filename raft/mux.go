package raft

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/raft/walstore"
)

// Stream header, sent once by the dialing side of every Raft connection
// before any of hashicorp/raft's own bytes, so one listener can carry every
// group of a broker:
//
//	 0                   4         5         6
//	+----+----+----+----+---------+---------+---------------------+
//	| 'W'| 'R'| 'F'| 'T'| version | namelen | group name          |
//	|        magic      |   = 1   |  1..255 | namelen bytes,      |
//	|                   |         |         | [A-Za-z0-9._-]      |
//	+----+----+----+----+---------+---------+---------------------+
//
// Version 2 adds the identity of the member the dialer means to reach,
// from a member address "host:port#identity" (MemberAddr):
//
//	| 'WRFT' | 2 | namelen | group name | idlen (0..255) | identity |
//
// A node whose MuxConfig.Identity differs closes the stream: a broker
// whose data directory was replaced (a new incarnation) is not reached
// through a group configuration that names its former self, so it can
// neither vote nor take entries there until the leader re-adds it.
//
// The accepting side answers nothing: after the header the stream belongs
// to the group's raft.NetworkTransport. A connection whose header is not
// complete within MuxConfig.HeaderTimeout, has the wrong magic or version,
// or names a group this node does not run, is closed and counted in
// weir_raft_mux_connections_total{result="rejected"}. A new header version
// is a new version byte; an old node closes it, and the dialer's group
// sees an ordinary failed RPC.
const (
	headerMagic     = "WRFT"
	headerVersion   = 1
	headerVersionID = 2
	headerFixed     = len(headerMagic) + 2
	maxGroupName    = 255
	// memberSep separates a member address's dial address and identity.
	memberSep = "#"
)

// MemberAddr is the address of a group member that must be the process
// with identity to be reached ("" reaches whoever listens at addr).
func MemberAddr(addr, identity string) string {
	if identity == "" {
		return addr
	}
	return addr + memberSep + identity
}

// SplitMemberAddr splits a member address into the address to dial and
// the identity expected there.
func SplitMemberAddr(member string) (addr, identity string) {
	addr, identity, _ = strings.Cut(member, memberSep)
	return addr, identity
}

// Rejection reasons, the values of the mux connection metric's reason label.
const (
	rejectBadHeader    = "bad_header"
	rejectUnknownGroup = "unknown_group"
	rejectWrongMember  = "wrong_member"
	rejectClosed       = "closed"
)

// MuxConfig configures a Mux.
type MuxConfig struct {
	// Advertise is the address peers dial to reach this node (rpc_addr as
	// others see it). Empty means the listener's own address.
	Advertise string
	// Logger receives the mux's and every group's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the raft collectors; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// HeaderTimeout bounds how long an inbound connection may take to send
	// its header. Default 5 s.
	HeaderTimeout time.Duration
	// Identity names this process (the broker's incarnation): streams
	// dialed to a member address with another identity are refused.
	Identity string
	// HandOffBytes bounds what followers keep of the entries they stored
	// for their applies to take (walstore.Options.HandOffBytes); 0 means
	// walstore.DefaultHandOffBytes.
	HandOffBytes int64
}

// Mux owns a broker's Raft listener and routes each inbound connection to
// the group its header names. Groups come and go at runtime: Start adds one,
// (*Group).Shutdown removes it.
type Mux struct {
	ln        net.Listener
	advertise string
	log       *slog.Logger
	peerLogs  *peerLogLimit // the groups' complaints about a peer (logging.go)
	metrics   *metrics
	headerTO  time.Duration
	identity  string
	handOff   int64 // MuxConfig.HandOffBytes

	mu      sync.Mutex
	layers  map[string]*layer // group → accept queue, by mu
	groups  map[string]*Group // group → running group, by mu (metrics)
	pending map[net.Conn]bool // connections still sending their header, by mu
	closed  bool              // by mu
	done    chan struct{}     // closed by Close
	wg      sync.WaitGroup    // accept loop and header readers

	rpcMu    sync.Mutex
	rpcState *rpcState     // RPC services and pool, made on first use, by rpcMu
	hub      *transportHub // shared Raft transport (transport.go), made on first use, by rpcMu

	storeMu sync.Mutex
	stores  map[string]*walstore.Store // Config.Dir → shared log, opened on first use, by storeMu

	// Leadership (leadership.go): every group's observer sends on obsCh,
	// one goroutine dispatches.
	obsCh  chan hraft.Observation
	leadCh chan *Group
	byRaft map[*hraft.Raft]*Group // by mu
}

// NewMux starts serving ln. The Mux owns ln from here on and closes it in
// Close.
func NewMux(ln net.Listener, cfg MuxConfig) (*Mux, error) {
	m := &Mux{
		ln:        ln,
		advertise: cfg.Advertise,
		log:       cfg.Logger,
		peerLogs:  newPeerLogLimit(peerLogEvery),
		headerTO:  cfg.HeaderTimeout,
		identity:  cfg.Identity,
		handOff:   cfg.HandOffBytes,
		layers:    make(map[string]*layer),
		groups:    make(map[string]*Group),
		pending:   make(map[net.Conn]bool),
		done:      make(chan struct{}),
		stores:    make(map[string]*walstore.Store),
		obsCh:     make(chan hraft.Observation, leadershipQueue),
		leadCh:    make(chan *Group, leadershipQueue),
		byRaft:    make(map[*hraft.Raft]*Group),
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.advertise == "" {
		m.advertise = ln.Addr().String()
	}
	if m.headerTO <= 0 {
		m.headerTO = 5 * time.Second
	}
	met, err := newMetrics(cfg.Registerer, m)
	if err != nil {
		return nil, err
	}
	m.metrics = met
	m.wg.Add(2)
	go m.acceptLoop()
	go m.dispatchLeadership()
	return m, nil
}

// Addr is the address peers dial: the one to put in Server.Addr.
func (m *Mux) Addr() string { return m.advertise }

// Close stops the listener, shuts down every group still running, closes
// the connections handed to them and waits for the mux's goroutines.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	groups := make([]*Group, 0, len(m.groups))
	for _, g := range m.groups {
		groups = append(groups, g)
	}
	for c := range m.pending {
		c.Close()
	}
	m.mu.Unlock()

	err := m.ln.Close()
	var errs []error
	for _, g := range groups {
		if gerr := g.Shutdown(); gerr != nil {
			errs = append(errs, gerr)
		}
	}
	m.mu.Lock()
	layers := make([]*layer, 0, len(m.layers))
	for _, l := range m.layers {
		layers = append(layers, l)
	}
	m.mu.Unlock()
	for _, l := range layers {
		l.Close()
	}
	errs = append(errs, m.closeStores())
	m.wg.Wait()
	m.metrics.unregister()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return errors.Join(append(errs, err)...)
}

// Layer registers group and returns the raft.StreamLayer its
// NetworkTransport uses: Accept yields the connections whose header named
// group, Dial writes that header. Closing the layer unregisters the group;
// Layer fails if the group is already registered or the mux is closed.
func (m *Mux) Layer(group string) (hraft.StreamLayer, error) {
	if err := notRPCStream(group); err != nil {
		return nil, err
	}
	return m.newLayer(group)
}

// notRPCStream keeps Raft groups out of the names RPC services use, so a
// group named like a service (topics may start with '_') never shadows
// one.
func notRPCStream(group string) error {
	if strings.HasPrefix(group, rpcStreamPrefix) {
		return fmt.Errorf("raft: group name %q uses the prefix reserved for rpc services", group)
	}
	return nil
}

func (m *Mux) newLayer(group string) (*layer, error) {
	if err := validGroupName(group); err != nil {
		return nil, err
	}
	l := &layer{
		mux:   m,
		group: group,
		hdr:   encodeHeader(group, ""),
		conns: make(chan net.Conn, 8),
		done:  make(chan struct{}),
		open:  make(map[net.Conn]bool),
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, net.ErrClosed
	}
	if _, ok := m.layers[group]; ok {
		return nil, fmt.Errorf("raft: group %q already registered on this mux", group)
	}
	m.layers[group] = l
	return l, nil
}

func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	var backoff time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off as net/http
			// does rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			m.log.Warn("raft mux accept failed", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			c.Close()
			return
		}
		m.pending[c] = true
		m.wg.Add(1)
		m.mu.Unlock()
		// The header is read on its own goroutine so one slow or silent
		// dialer cannot hold up the accepts of every other group.
		go m.route(c)
	}
}

// route reads c's header and hands c to its group's accept queue.
func (m *Mux) route(c net.Conn) {
	defer m.wg.Done()
	group, identity, err := readHeader(c, m.headerTO)
	m.mu.Lock()
	delete(m.pending, c)
	l := m.layers[group]
	closed := m.closed
	m.mu.Unlock()
	switch {
	case closed:
		m.reject(c, rejectClosed, group, nil)
	case err != nil:
		m.reject(c, rejectBadHeader, group, err)
	case l == nil:
		m.reject(c, rejectUnknownGroup, group, nil)
	case identity != "" && identity != m.identity:
		m.reject(c, rejectWrongMember, group, fmt.Errorf("stream for member %s, this is %s", identity, m.identity))
	default:
		if !l.deliver(c) {
			m.reject(c, rejectClosed, group, nil)
			return
		}
		m.metrics.connAccepted.Inc()
	}
}

func (m *Mux) reject(c net.Conn, reason, group string, err error) {
	m.metrics.connRejected.WithLabelValues(reason).Inc()
	m.log.Debug("raft mux rejected connection", "remote", c.RemoteAddr().String(),
		"reason", reason, "group", group, "err", err)
	c.Close()
}

func (m *Mux) removeLayer(l *layer) {
	m.mu.Lock()
	if m.layers[l.group] == l {
		delete(m.layers, l.group)
	}
	m.mu.Unlock()
}

func encodeHeader(group, identity string) []byte {
	h := make([]byte, 0, headerFixed+len(group)+1+len(identity))
	h = append(h, headerMagic...)
	if identity == "" {
		h = append(h, headerVersion, byte(len(group)))
		return append(h, group...)
	}
	h = append(h, headerVersionID, byte(len(group)))
	h = append(h, group...)
	h = append(h, byte(len(identity)))
	return append(h, identity...)
}

// readHeader reads and checks a stream header under a deadline, then clears
// the deadline: from then on NetworkTransport sets its own.
func readHeader(c net.Conn, timeout time.Duration) (group, identity string, err error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return "", "", err
	}
	var fixed [headerFixed]byte
	if _, err := io.ReadFull(c, fixed[:]); err != nil {
		return "", "", fmt.Errorf("reading header: %w", err)
	}
	if string(fixed[:len(headerMagic)]) != headerMagic {
		return "", "", fmt.Errorf("bad magic %q", fixed[:len(headerMagic)])
	}
	version := fixed[len(headerMagic)]
	if version != headerVersion && version != headerVersionID {
		return "", "", fmt.Errorf("unsupported header version %d", version)
	}
	n := int(fixed[len(headerMagic)+1])
	if n == 0 {
		return "", "", errors.New("empty group name")
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(c, name); err != nil {
		return "", "", fmt.Errorf("reading group name: %w", err)
	}
	if err := validGroupName(string(name)); err != nil {
		return "", "", err
	}
	if version == headerVersionID {
		var idLen [1]byte
		if _, err := io.ReadFull(c, idLen[:]); err != nil {
			return "", "", fmt.Errorf("reading identity: %w", err)
		}
		id := make([]byte, idLen[0])
		if _, err := io.ReadFull(c, id); err != nil {
			return "", "", fmt.Errorf("reading identity: %w", err)
		}
		identity = string(id)
	}
	return string(name), identity, c.SetReadDeadline(time.Time{})
}

// validGroupName keeps group names usable both in the header and as a
// directory name under Config.Dir.
func validGroupName(g string) error {
	if g == "" || len(g) > maxGroupName || g == "." || g == ".." {
		return fmt.Errorf("raft: invalid group name %q", g)
	}
	for i := 0; i < len(g); i++ {
		c := g[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("raft: invalid group name %q: byte %q", g, c)
		}
	}
	return nil
}

// layer is one group's raft.StreamLayer on the shared listener.
type layer struct {
	mux   *Mux
	group string
	hdr   []byte
	conns chan net.Conn // routed, not yet accepted
	done  chan struct{} // closed by Close

	mu     sync.Mutex
	open   map[net.Conn]bool // inbound connections handed to the transport, by mu
	closed bool              // by mu
}

// deliver queues c for Accept; false if the layer closed first.
func (l *layer) deliver(c net.Conn) bool {
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.open[tc] = true
	l.mu.Unlock()
	select {
	case l.conns <- tc:
		return true
	case <-l.done:
		tc.Close()
		return false
	}
}

// Accept implements net.Listener for the group's NetworkTransport.
func (l *layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close unregisters the group and closes the inbound connections it was
// given: hashicorp/raft's per-connection handlers would otherwise sit in a
// read until the peer hung up, keeping a removed group's goroutines alive.
func (l *layer) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	open := l.open
	l.open = nil
	l.mu.Unlock()
	l.mux.removeLayer(l)
	for c := range open {
		c.Close()
	}
	for {
		select {
		case c := <-l.conns:
			c.Close()
		default:
			return nil
		}
	}
}

// Addr is the shared listener's advertised address: every group of a node
// has the same Raft address.
func (l *layer) Addr() net.Addr { return advertAddr(l.mux.advertise) }

// Dial connects to a peer's mux and names this group.
func (l *layer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr, identity := SplitMemberAddr(string(address))
	hdr := l.hdr
	if identity != "" {
		hdr = encodeHeader(l.group, identity)
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		c.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := c.Write(hdr); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft: writing stream header to %s: %w", address, err)
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

func (l *layer) forget(c net.Conn) {
	l.mu.Lock()
	delete(l.open, c)
	l.mu.Unlock()
}

// trackedConn removes itself from its layer's open set when closed.
type trackedConn struct {
	net.Conn
	l    *layer
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c) })
	return err
}

// NetConn returns the connection c wraps (as tls.Conn does), so that the
// transport's writer can hand a batch of buffers to it in one writev:
// net.Buffers.WriteTo only does that for the net package's own types and
// otherwise writes buffer by buffer, a syscall each.
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

// advertAddr is a net.Addr for an address string; NetworkTransport only
// calls String on it.
type advertAddr string

func (a advertAddr) Network() string { return "tcp" }
func (a advertAddr) String() string  { return string(a) }
