package config

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"github.com/weir-broker/weir/config/tlstest"
)

// testCA is a tlstest CA as this package's TLS tests use it: the
// certificate and its PEM as fields, certificates as PEM or tls values.
type testCA struct {
	*tlstest.CA
	cert *x509.Certificate
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	ca := tlstest.NewCA(t, cn)
	return &testCA{CA: ca, cert: ca.Cert, pem: ca.CertPEM}
}

func (ca *testCA) pool() *x509.CertPool { return ca.Pool() }

// server issues a certificate for localhost and 127.0.0.1.
func (ca *testCA) server(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	c := ca.Server(t, cn)
	return c.CertPEM, c.KeyPEM
}

func (ca *testCA) client(t *testing.T, subject pkix.Name) tls.Certificate {
	t.Helper()
	return ca.Client(t, subject).TLS
}

// replaceFile writes data as certificate tooling does: to a temporary
// file, then renamed over path.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tlstest.WriteFile(t, path, data)
}
