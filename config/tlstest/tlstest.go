package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Every certificate is valid from an hour ago, so that a clock a little
// behind does not refuse it, for a day: longer than any test runs.
const (
	validBefore = time.Hour
	validFor    = 24 * time.Hour
)

// CA is a certificate authority with an ECDSA P-256 key.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// Cert is a certificate a CA issued and its key.
type Cert struct {
	TLS     tls.Certificate // with Leaf set
	CertPEM []byte
	KeyPEM  []byte // PKCS #8
}

// NewCA makes a self-signed CA with the common name given.
func NewCA(t testing.TB, commonName string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	cert, certPEM := sign(t, tmpl, nil, key, key)
	return &CA{Cert: cert, CertPEM: certPEM, key: key}
}

// Pool holds the CA alone, for a client's RootCAs or a server's
// ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ClientConfig trusts the CA only and presents certs.
func (ca *CA) ClientConfig(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool(), Certificates: certs}
}

// WriteCertFile writes the CA's certificate to dir/ca.pem and returns
// the path.
func (ca *CA) WriteCertFile(t testing.TB, dir string) string {
	t.Helper()
	return WriteFile(t, filepath.Join(dir, "ca.pem"), ca.CertPEM)
}

// Server issues a server certificate with the common name given for
// hosts (IP addresses or DNS names); without hosts, for localhost and
// 127.0.0.1, where tests' brokers listen.
func (ca *CA) Server(t testing.TB, commonName string, hosts ...string) *Cert {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1"}
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(t, tmpl)
}

// Client issues a client certificate with the subject given: a broker
// verifying it takes the subject's distinguished name for the principal.
func (ca *CA) Client(t testing.TB, subject pkix.Name) *Cert {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		Subject:     subject,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(t testing.TB, tmpl *x509.Certificate) *Cert {
	t.Helper()
	key := newKey(t)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	leaf, certPEM := sign(t, tmpl, ca.Cert, key, ca.key)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: encoding a key: %v", err)
	}
	return &Cert{
		TLS:     tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf},
		CertPEM: certPEM,
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// WriteFiles writes the certificate and its key to dir/name.pem and
// dir/name.key and returns the paths. The key goes first: a reader
// reloading on a new certificate then finds its key already there.
func (c *Cert) WriteFiles(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	keyFile = WriteFile(t, filepath.Join(dir, name+".key"), c.KeyPEM)
	certFile = WriteFile(t, filepath.Join(dir, name+".pem"), c.CertPEM)
	return certFile, keyFile
}

// WriteFile writes data to path as certificate tooling does, to a
// temporary file renamed over path, so that a reader never sees half a
// file, and returns path.
func WriteFile(t testing.TB, path string, data []byte) string {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return path
}

// sign completes tmpl (serial, validity) and signs it with signerKey,
// as parent, or itself when parent is nil.
func sign(t testing.TB, tmpl, parent *x509.Certificate, key, signerKey *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("tlstest: a serial number: %v", err)
	}
	now := time.Now()
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial, now.Add(-validBefore), now.Add(validFor)
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatalf("tlstest: signing %s: %v", tmpl.Subject, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: generating a key: %v", err)
	}
	return key
}
