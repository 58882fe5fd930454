package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/config"
)

// listenerServer is a broker whose node config has the listeners given,
// each served on its own loopback port.
type listenerServer struct {
	s     *Server
	addrs map[string]string // listener name -> the loopback address it is served on
	// principals receives the principal of each Metadata request's
	// connection, read on the connection's own goroutine.
	principals chan string
}

func startListenerServer(t *testing.T, opts Options, listeners ...config.Listener) *listenerServer {
	t.Helper()
	node := config.Node{NodeID: 0, DataDir: t.TempDir(), KafkaAddr: listeners[0].Address, AdvertisedKafkaAddr: listeners[0].Advertised(),
		AdminAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0", LogLevel: "info", MaxRequestBytes: 1 << 20, Listeners: listeners}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(broker.Options{Node: node, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	opts.Logger = logger
	s, err := NewServer(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	ls := &listenerServer{s: s, addrs: map[string]string{}, principals: make(chan string, 16)}
	metadata := s.apis[3].handle
	s.apis[3].handle = func(c *clientConn, req kmsg.Request) (kmsg.Response, error) {
		select {
		case ls.principals <- c.principal():
		default:
		}
		return metadata(c, req)
	}
	done := make(chan struct{}, len(listeners))
	for _, l := range listeners {
		spec := Listener{Name: l.Name, SecurityProtocol: l.SecurityProtocol, SASLMechanisms: l.SASLMechanisms, AdvertisedAddr: l.Advertised()}
		if l.TLS != nil {
			if spec.TLS, err = config.NewTLSReloader(*l.TLS, logger); err != nil {
				t.Fatal(err)
			}
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls.addrs[l.Name] = ln.Addr().String()
		go func() {
			defer func() { done <- struct{}{} }()
			if err := s.ServeListener(ln, spec); err != nil {
				t.Errorf("listener %s: %v", l.Name, err)
			}
		}()
	}
	t.Cleanup(func() {
		ctx, cancel := contextWithTimeout(10 * time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		for range listeners {
			<-done // ServeListener returned; Close has waited for the rest
		}
	})
	return ls
}

func (ls *listenerServer) dialTLS(t *testing.T, name string, cfg *tls.Config) (*rawConn, error) {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ls.addrs[name], cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}, nil
}

// metadataBrokers asks for the broker list (no topics) and returns
// "host:port" of each broker.
func metadataBrokers(c *rawConn) []string {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	var out []string
	for _, b := range resp.Brokers {
		out = append(out, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	return out
}

func describeClusterBrokers(c *rawConn) []string {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 1
	req.EndpointType = 1
	resp := c.roundTrip(req).(*kmsg.DescribeClusterResponse)
	var out []string
	for _, b := range resp.Brokers {
		out = append(out, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	return out
}

func (ls *listenerServer) principal(t *testing.T) string {
	t.Helper()
	select {
	case p := <-ls.principals:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no Metadata request was handled")
		return ""
	}
}

func plaintextListener() config.Listener {
	return config.Listener{Name: "internal", Address: "127.0.0.1:0", AdvertisedAddress: "internal.example:9092", SecurityProtocol: config.ProtocolPlaintext}
}

func sslListener(tlsCfg config.ListenerTLS) config.Listener {
	return config.Listener{Name: "external", Address: "127.0.0.1:0", AdvertisedAddress: "external.example:19093",
		SecurityProtocol: config.ProtocolSSL, TLS: &tlsCfg}
}

// TestListenersAnswerWithTheirOwnAddresses: Metadata and DescribeCluster
// name the broker at the advertised address of the listener the request
// came in on; over TLS a verified client certificate is the principal,
// and without one (client_auth requested) the client is anonymous.
func TestListenersAnswerWithTheirOwnAddresses(t *testing.T) {
	ca := newTestCA(t)
	ls := startListenerServer(t, Options{}, plaintextListener(), sslListener(ca.listenerTLS(t, t.TempDir(), config.ClientAuthRequested)))

	plain := dial(t, ls.addrs["internal"])
	if got := metadataBrokers(plain); !slices.Equal(got, []string{"internal.example:9092"}) {
		t.Errorf("Metadata on the PLAINTEXT listener: %v", got)
	}
	if got := ls.principal(t); got != anonymousPrincipal {
		t.Errorf("PLAINTEXT principal %q", got)
	}
	if got := describeClusterBrokers(plain); !slices.Equal(got, []string{"internal.example:9092"}) {
		t.Errorf("DescribeCluster on the PLAINTEXT listener: %v", got)
	}

	anon, err := ls.dialTLS(t, "external", &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := metadataBrokers(anon); !slices.Equal(got, []string{"external.example:19093"}) {
		t.Errorf("Metadata on the SSL listener: %v", got)
	}
	if got := ls.principal(t); got != anonymousPrincipal {
		t.Errorf("SSL without a client certificate: principal %q", got)
	}
	if got := describeClusterBrokers(anon); !slices.Equal(got, []string{"external.example:19093"}) {
		t.Errorf("DescribeCluster on the SSL listener: %v", got)
	}

	alice := ca.client(t, pkix.Name{CommonName: "alice", Organization: []string{"acme"}})
	withCert, err := ls.dialTLS(t, "external", &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{alice}})
	if err != nil {
		t.Fatal(err)
	}
	metadataBrokers(withCert)
	if got, want := ls.principal(t), "User:CN=alice,O=acme"; got != want {
		t.Errorf("SSL with a client certificate: principal %q, want %q", got, want)
	}
}

// TestTLSListenerRequiresClientCertificate: with client_auth required a
// client without a certificate, or with one of another CA, is refused in
// the handshake; one the CA signed gets in as its subject.
func TestTLSListenerRequiresClientCertificate(t *testing.T) {
	ca := newTestCA(t)
	ls := startListenerServer(t, Options{}, sslListener(ca.listenerTLS(t, t.TempDir(), config.ClientAuthRequired)))
	stranger := newTestCA(t).client(t, pkix.Name{CommonName: "mallory"})
	for name, cfg := range map[string]*tls.Config{
		"no certificate": {RootCAs: ca.pool(), ServerName: "127.0.0.1"},
		// Sent although the server names its own CA as acceptable.
		"another CA's certificate": {RootCAs: ca.pool(), ServerName: "127.0.0.1",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger, nil }},
	} {
		c, err := ls.dialTLS(t, "external", cfg)
		if err != nil {
			continue // refused in the client's handshake (TLS 1.2)
		}
		// TLS 1.3: the client finishes first; the server's verdict
		// arrives as an alert and a closed connection.
		c.send(kmsg.NewPtrApiVersionsRequest())
		c.expectClosed()
		t.Logf("%s: refused", name)
	}

	bob := ca.client(t, pkix.Name{CommonName: "bob"})
	c, err := ls.dialTLS(t, "external", &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{bob}})
	if err != nil {
		t.Fatal(err)
	}
	if got := metadataBrokers(c); !slices.Equal(got, []string{"external.example:19093"}) {
		t.Errorf("Metadata: %v", got)
	}
	if got := ls.principal(t); got != "User:CN=bob" {
		t.Errorf("principal %q, want User:CN=bob", got)
	}
}

// TestTLSListenerClosesWhatIsNotTLS: a plaintext Kafka request, or a
// client that never finishes its handshake, costs the connection and
// nothing else.
func TestTLSListenerClosesWhatIsNotTLS(t *testing.T) {
	ca := newTestCA(t)
	ls := startListenerServer(t, Options{TLSHandshakeTimeout: 300 * time.Millisecond},
		sslListener(ca.listenerTLS(t, t.TempDir(), config.ClientAuthNone)))

	plain := dial(t, ls.addrs["external"])
	plain.send(kmsg.NewPtrApiVersionsRequest())
	plain.expectClosed()

	// Silent, and half a ClientHello: the handshake deadline closes both.
	silent := dial(t, ls.addrs["external"])
	silent.expectClosed()
	partial := dial(t, ls.addrs["external"])
	partial.writeRaw(clientHello(t)[:20])
	partial.expectClosed()

	c, err := ls.dialTLS(t, "external", &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := metadataBrokers(c); !slices.Equal(got, []string{"external.example:19093"}) {
		t.Errorf("Metadata after the refusals: %v", got)
	}
	waitConns(t, ls.s, 1)
}

// waitConns waits (up to 10 s) until the server holds n connections.
func waitConns(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.conns)
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections held, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSASLIsPerListener: a SASL_SSL listener needs TLS and then SASL with
// its own mechanisms, while a PLAINTEXT listener of the same server has no
// SASL at all.
func TestSASLIsPerListener(t *testing.T) {
	ca := newTestCA(t)
	tlsCfg := ca.listenerTLS(t, t.TempDir(), config.ClientAuthNone)
	saslSSL := config.Listener{Name: "secure", Address: "127.0.0.1:0", AdvertisedAddress: "secure.example:9094",
		SecurityProtocol: config.ProtocolSASLSSL, SASLMechanisms: []string{config.MechanismSCRAMSHA512}, TLS: &tlsCfg}
	ls := startListenerServer(t, Options{}, plaintextListener(), saslSSL)

	handshake := func(c *rawConn) *kmsg.SASLHandshakeResponse {
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, config.MechanismSCRAMSHA512
		return c.roundTrip(req).(*kmsg.SASLHandshakeResponse)
	}
	if resp := handshake(dial(t, ls.addrs["internal"])); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("SaslHandshake on PLAINTEXT: error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}

	secure, err := ls.dialTLS(t, "secure", &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if resp := handshake(secure); resp.ErrorCode != 0 || !slices.Equal(resp.SupportedMechanisms, []string{config.MechanismSCRAMSHA512}) {
		t.Errorf("SaslHandshake on SASL_SSL: error %d, mechanisms %v", resp.ErrorCode, resp.SupportedMechanisms)
	}
	unauthenticated, err := ls.dialTLS(t, "secure", &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	unauthenticated.send(kmsg.NewPtrMetadataRequest())
	unauthenticated.expectClosed()

	plain := dial(t, ls.addrs["secure"])
	plain.send(kmsg.NewPtrApiVersionsRequest())
	plain.expectClosed()
}

// TestServeListenerRefusesInconsistentListeners: a listener whose
// protocol and settings disagree is refused before it accepts anything.
func TestServeListenerRefusesInconsistentListeners(t *testing.T) {
	_, b, _ := startServer(t)
	s, err := NewServer(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for name, l := range map[string]Listener{
		"SSL without TLS":              {Name: "a", SecurityProtocol: config.ProtocolSSL, AdvertisedAddr: "h:1"},
		"SASL without mechanisms":      {Name: "a", SecurityProtocol: config.ProtocolSASLPlaintext, AdvertisedAddr: "h:1"},
		"PLAINTEXT with mechanisms":    {Name: "a", SecurityProtocol: config.ProtocolPlaintext, SASLMechanisms: []string{"PLAIN"}, AdvertisedAddr: "h:1"},
		"no advertised address":        {Name: "a", SecurityProtocol: config.ProtocolPlaintext},
		"no name":                      {SecurityProtocol: config.ProtocolPlaintext, AdvertisedAddr: "h:1"},
		"unknown protocol":             {Name: "a", SecurityProtocol: "QUIC", AdvertisedAddr: "h:1"},
		"Serve without AdvertisedAddr": {},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if name == "Serve without AdvertisedAddr" {
			err = s.Serve(ln)
		} else {
			err = s.ServeListener(ln, l)
		}
		if err == nil {
			t.Errorf("%s: served", name)
		}
		if _, dialErr := net.DialTimeout("tcp", ln.Addr().String(), time.Second); dialErr == nil {
			t.Errorf("%s: the listener was left open", name)
		}
	}
}
