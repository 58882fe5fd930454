package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/config/tlstest"
)

// testCA is a tlstest CA with what the TLS listener tests ask of it.
type testCA struct{ *tlstest.CA }

func newTestCA(t testing.TB) testCA {
	t.Helper()
	return testCA{tlstest.NewCA(t, "weir test CA")}
}

func (ca testCA) pool() *x509.CertPool { return ca.Pool() }

// client is a client certificate with the subject given.
func (ca testCA) client(t testing.TB, subject pkix.Name) tls.Certificate {
	t.Helper()
	return ca.Client(t, subject).TLS
}

// listenerTLS writes a server certificate for localhost and 127.0.0.1,
// and the CA, to dir and returns the listener settings naming them.
func (ca testCA) listenerTLS(t testing.TB, dir, clientAuth string) config.ListenerTLS {
	t.Helper()
	certFile, keyFile := ca.Server(t, "weir broker").WriteFiles(t, dir, "server")
	return config.ListenerTLS{CertFile: certFile, KeyFile: keyFile, CAFile: ca.WriteCertFile(t, dir), ClientAuth: clientAuth}
}
