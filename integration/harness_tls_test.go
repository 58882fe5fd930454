package integration

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/config/tlstest"
)

// Brokers with named Kafka listeners (the listeners key of the node
// config) and the certificates their SSL listeners serve.
//
// StartBroker and StartCluster give every broker --kafka-addr, which the
// broker refuses together with listeners, so brokers with listeners are
// assembled here from the same pieces (Broker, launch, waitReady,
// cleanup): their ports are chosen first, written into a config file, and
// --kafka-addr is left out. Broker.KafkaAddr is the first PLAINTEXT
// listener's address, so the harness's readiness ping and b.Client,
// b.Admin and b.RawRequest keep working.

// TestListener is one Kafka listener of a test broker.
type TestListener struct {
	Name     string
	Protocol string // security_protocol; empty: taken from Name
	// AdvertisedHost is the host clients are told, with the bound port;
	// empty advertises the bound loopback address.
	AdvertisedHost string
	SASLMechanisms []string
	TLS            *TestListenerTLS
}

// TestListenerTLS is an SSL listener's certificate files.
type TestListenerTLS struct {
	CertFile, KeyFile, CAFile string
	ClientAuth                string // none, requested, required
}

// ListenerBroker is a broker started with listeners.
type ListenerBroker struct {
	*Broker
	// Addrs are the listeners' bound loopback addresses by name;
	// Advertised what each advertises.
	Addrs, Advertised map[string]string
}

// StartBrokerWithListeners starts a broker serving the listeners given
// (one of them PLAINTEXT) on free loopback ports and waits until it is
// ready. opts apply as to StartBroker, except WithConfigFile, which the
// listeners need.
func StartBrokerWithListeners(t testing.TB, listeners []TestListener, opts ...BrokerOption) *ListenerBroker {
	t.Helper()
	bs := startListenerBrokers(t, 1, func(int) []TestListener { return listeners }, opts)
	return bs[0]
}

// StartClusterWithListeners starts n brokers (node ids 0..n-1, seeding
// each other) whose listeners are listeners(i), and waits until all are
// ready and agree on the membership, as StartCluster does.
func StartClusterWithListeners(t testing.TB, n int, listeners func(node int) []TestListener, opts ...BrokerOption) []*ListenerBroker {
	t.Helper()
	return startListenerBrokers(t, n, listeners, opts)
}

func startListenerBrokers(t testing.TB, n int, listeners func(node int) []TestListener, opts []BrokerOption) []*ListenerBroker {
	t.Helper()
	probe := brokerSpec{}
	for _, o := range opts {
		o(&probe)
	}
	if probe.configFile != "" || probe.dataDir != "" {
		t.Fatal("brokers with listeners choose their config file and data directory")
	}
	bin := WeirBinary(t)
	_ = t.TempDir() // outlives the cleanup below, which prints the logs

	var running []*ListenerBroker
	t.Cleanup(func() {
		for _, lb := range running {
			lb.closeRawClient()
			lb.forceStop(t)
			if t.Failed() {
				t.Logf("--- weir log (node %d, %s), last %d KiB ---\n%s", lb.NodeID, lb.logPath, logTailBytes>>10, lb.logTail(logTailBytes))
			}
		}
	})
	// Ports are released before the brokers bind them: on a bind failure
	// start again on new ports, as StartCluster does.
	for attempt := 1; ; attempt++ {
		running = running[:0]
		for i := range n {
			ls := listeners(i)
			addrs := freeLoopbackAddrs(t, 2+len(ls))
			running = append(running, newListenerBroker(t, bin, i, n, addrs[0], addrs[1], addrs[2:], ls, opts))
		}
		for i, lb := range running {
			var seeds []string
			for j, o := range running {
				if j != i {
					seeds = append(seeds, o.RPCAddr)
				}
			}
			if len(seeds) > 0 {
				lb.args = append(lb.args, "--seeds", strings.Join(seeds, ","))
			}
			if err := lb.launch(); err != nil {
				t.Fatalf("starting weir node %d: %v", lb.NodeID, err)
			}
		}
		deadline := time.Now().Add(clusterTimeout)
		var errs []string
		for _, lb := range running {
			if err := lb.waitReady(time.Until(deadline)); err != nil {
				errs = append(errs, fmt.Sprintf("node %d: %v", lb.NodeID, err))
			}
		}
		if len(errs) == 0 {
			if n > 1 {
				bs := make([]*Broker, n)
				for i, lb := range running {
					bs[i] = lb.Broker
				}
				waitClusterView(t, bs, time.Until(deadline)+time.Second)
			}
			return running
		}
		bindFailure := false
		for _, lb := range running {
			bindFailure = bindFailure || lb.exited() && strings.Contains(lb.logTail(8<<10), "address already in use")
			lb.forceStop(t)
		}
		if !bindFailure || attempt == 3 {
			t.Fatalf("brokers with listeners did not become ready:\n  %s", strings.Join(errs, "\n  "))
		}
		t.Logf("a broker could not bind its ports (attempt %d); starting again on new ports", attempt)
	}
}

// newListenerBroker builds (without starting) node id with its listeners
// on listenerAddrs, written into its config file.
func newListenerBroker(t testing.TB, bin string, id, n int, adminAddr, rpcAddr string, listenerAddrs []string, listeners []TestListener, opts []BrokerOption) *ListenerBroker {
	t.Helper()
	spec := brokerSpec{nodeID: 1, logLevel: os.Getenv("WEIR_TEST_LOG_LEVEL")}
	if spec.logLevel == "" {
		spec.logLevel = "info"
	}
	for _, o := range opts {
		o(&spec)
	}
	if n > 1 {
		spec.nodeID = id
	}
	spec.dataDir = t.TempDir()
	lb := &ListenerBroker{
		Broker: &Broker{AdminAddr: adminAddr, RPCAddr: rpcAddr, DataDir: spec.dataDir, NodeID: spec.nodeID, bin: bin,
			logPath: filepath.Join(t.TempDir(), "weir-node"+strconv.Itoa(spec.nodeID)+".log")},
		Addrs: map[string]string{}, Advertised: map[string]string{},
	}
	var yaml strings.Builder
	yaml.WriteString("listeners:\n")
	for i, l := range listeners {
		addr := listenerAddrs[i]
		advertised := addr
		if l.AdvertisedHost != "" {
			_, port, _ := net.SplitHostPort(addr)
			advertised = net.JoinHostPort(l.AdvertisedHost, port)
		}
		lb.Addrs[l.Name], lb.Advertised[l.Name] = addr, advertised
		protocol := l.Protocol
		if protocol == "" {
			protocol = l.Name
		}
		if protocol == "PLAINTEXT" && lb.KafkaAddr == "" {
			lb.KafkaAddr = addr
		}
		fmt.Fprintf(&yaml, "  - name: %s\n    address: %q\n    advertised_address: %q\n    security_protocol: %s\n", l.Name, addr, advertised, protocol)
		if len(l.SASLMechanisms) > 0 {
			fmt.Fprintf(&yaml, "    sasl_mechanisms: [%s]\n", strings.Join(l.SASLMechanisms, ", "))
		}
		if l.TLS != nil {
			fmt.Fprintf(&yaml, "    tls:\n      cert_file: %q\n      key_file: %q\n      ca_file: %q\n      client_auth: %q\n",
				l.TLS.CertFile, l.TLS.KeyFile, l.TLS.CAFile, l.TLS.ClientAuth)
		}
	}
	if lb.KafkaAddr == "" {
		t.Fatal("a test broker needs a PLAINTEXT listener (the harness pings it)")
	}
	spec.configFile = filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(spec.configFile, []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	lb.spec = spec
	args := lb.buildArgs()
	if i := slices.Index(args, "--kafka-addr"); i >= 0 {
		args = slices.Delete(args, i, i+2)
	}
	lb.args = args
	return lb
}

// ---------------------------------------------------------------------------
// Certificates.

// TestCA is a tlstest CA whose certificate is written to CAFile, with the
// certificate files and client settings the tests' brokers and clients
// take.
type TestCA struct {
	*tlstest.CA
	CAFile string
	dir    string
}

// NewTestCA makes a CA whose certificate is written to a file in a
// temporary directory.
func NewTestCA(t testing.TB, name string) *TestCA {
	t.Helper()
	ca := &TestCA{CA: tlstest.NewCA(t, name), dir: t.TempDir()}
	ca.CAFile = ca.WriteCertFile(t, ca.dir)
	return ca
}

// ServerFiles issues a server certificate for localhost and 127.0.0.1
// with common name cn and writes it and its key under the names given
// (replacing them with a rename, as certificate tooling does).
func (ca *TestCA) ServerFiles(t testing.TB, cn, certFile, keyFile string) {
	t.Helper()
	c := ca.Server(t, cn)
	tlstest.WriteFile(t, keyFile, c.KeyPEM)
	tlstest.WriteFile(t, certFile, c.CertPEM)
}

// ListenerTLS issues a server certificate into the CA's directory and
// returns the listener settings serving it.
func (ca *TestCA) ListenerTLS(t testing.TB, clientAuth string) *TestListenerTLS {
	t.Helper()
	certFile, keyFile := ca.Server(t, "weir broker").WriteFiles(t, ca.dir, "server")
	return &TestListenerTLS{CertFile: certFile, KeyFile: keyFile, CAFile: ca.CAFile, ClientAuth: clientAuth}
}

// ClientCert issues a client certificate with common name cn.
func (ca *TestCA) ClientCert(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	return ca.Client(t, pkix.Name{CommonName: cn}).TLS
}

// ClientFiles issues a client certificate with common name cn and writes
// it and its key to PEM files, for clients configured by file (kcat).
func (ca *TestCA) ClientFiles(t testing.TB, cn string) (certFile, keyFile string) {
	t.Helper()
	return ca.Client(t, pkix.Name{CommonName: cn}).WriteFiles(t, t.TempDir(), "client")
}

// TLSClientOpts are kgo options for a client of an SSL listener at addr.
func TLSClientOpts(addr string, cfg *tls.Config) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg)}
}
