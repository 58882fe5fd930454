package kafka

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/config"
)

// Listener is one named Kafka listener of the server (Kafka's listeners,
// advertised.listeners and listener.security.protocol.map for one
// name). A request is answered with the addresses of the listener it
// arrived on, so clients stay on the network and protocol they chose.
type Listener struct {
	// Name is the listener's name as the broker registered it.
	Name string
	// SecurityProtocol says whether connections are TLS and whether
	// clients authenticate with SASL first.
	SecurityProtocol config.SecurityProtocol
	// SASLMechanisms are those offered on SASL_PLAINTEXT and SASL_SSL.
	SASLMechanisms []string
	// AdvertisedAddr is the host:port this broker gives clients of this
	// listener.
	AdvertisedAddr string
	// TLS serves the certificate of SSL and SASL_SSL listeners. The
	// server reloads it every Options.TLSReloadInterval until Close.
	TLS *config.TLSReloader
}

// DefaultTLSHandshakeTimeout is Options.TLSHandshakeTimeout's default.
const DefaultTLSHandshakeTimeout = 10 * time.Second

// check refuses a listener whose connections could not be served as its
// protocol says.
func (l Listener) check() error {
	var errs []error
	if l.Name == "" {
		errs = append(errs, errors.New("no name"))
	}
	p := l.SecurityProtocol
	if !p.Known() {
		errs = append(errs, fmt.Errorf("security protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", p))
	}
	if p.UsesTLS() != (l.TLS != nil) {
		errs = append(errs, fmt.Errorf("%s: a TLS configuration is needed for SSL and SASL_SSL, and only for them", p))
	}
	if p.UsesSASL() != (len(l.SASLMechanisms) > 0) {
		errs = append(errs, fmt.Errorf("%s: SASL mechanisms are needed for SASL_PLAINTEXT and SASL_SSL, and only for them", p))
	}
	if _, _, err := net.SplitHostPort(l.AdvertisedAddr); err != nil {
		errs = append(errs, fmt.Errorf("advertised address %q: %w", l.AdvertisedAddr, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("listener %q: %w", l.Name, err)
	}
	return nil
}

// listenerOfOptions is the listener Serve serves: PLAINTEXT, or
// SASL_PLAINTEXT when Options.SASLMechanisms is set.
func listenerOfOptions(opts Options) *Listener {
	l := &Listener{Name: string(config.ProtocolPlaintext), SecurityProtocol: config.ProtocolPlaintext, AdvertisedAddr: opts.AdvertisedAddr}
	if len(opts.SASLMechanisms) > 0 {
		l.Name, l.SecurityProtocol = string(config.ProtocolSASLPlaintext), config.ProtocolSASLPlaintext
		l.SASLMechanisms = opts.SASLMechanisms
	}
	return l
}

// tlsRecordPayloadBytes is the most one TLS record carries (RFC 8446
// 5.1): a fetch response is written through a buffer this size.
const tlsRecordPayloadBytes = 16 << 10

// startTLS runs the server side of the TLS handshake, bounded by
// Options.TLSHandshakeTimeout so that a client that never finishes it
// (or speaks plaintext and waits for an answer) costs its connection.
// After it the connection reads and writes through TLS, and a verified
// client certificate names the connection's principal.
func (c *clientConn) startTLS() error {
	tc := tls.Server(c.raw, c.listener.TLS.Config())
	if err := tc.SetDeadline(time.Now().Add(c.s.opts.TLSHandshakeTimeout)); err != nil {
		return err
	}
	if err := tc.HandshakeContext(c.ctx); err != nil {
		return err
	}
	if err := tc.SetDeadline(time.Time{}); err != nil {
		return err
	}
	c.nc = tc
	c.tlsWriter = bufio.NewWriterSize(tc, tlsRecordPayloadBytes)
	if p, ok := config.PeerPrincipal(tc.ConnectionState()); ok {
		c.tlsPrincipal = p
	}
	return nil
}

// saslRequired reports whether the connection's listener makes clients
// authenticate before anything but ApiVersions.
func (c *clientConn) saslRequired() bool { return c.listener.SecurityProtocol.UsesSASL() }

// reachable is bi as clients of this connection's listener reach it;
// false when bi has no such listener.
func (c *clientConn) reachable(bi broker.BrokerInfo) (broker.BrokerInfo, bool) {
	return bi.On(c.listener.Name)
}
