package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTLSReloadInterval is how often Run looks at the files when given
// no interval: certificates are renewed days before they expire, and a
// look is three stat calls.
const DefaultTLSReloadInterval = 30 * time.Second

// TLSReloader serves a listener's certificate and client CAs from files
// that are replaced while the broker runs (cert-manager, Vault agent, a
// cron job): each handshake gets the material last loaded, and Reload
// loads it again when the files change. Broken new files (a half-written
// certificate, a key that does not match yet) leave the previous material
// in place, so that a botched renewal does not take the listener down.
type TLSReloader struct {
	cfg        ListenerTLS
	logger     *slog.Logger
	clientAuth tls.ClientAuthType
	minVersion uint16

	current atomic.Pointer[tlsMaterial] // read by every handshake

	mu      sync.Mutex // serialises Reload
	failure *reloadFailure
}

// tlsMaterial is what one load of the files produced.
type tlsMaterial struct {
	stamps fileStamps
	// config is served to handshakes as is, so it is never modified.
	config *tls.Config
}

// reloadFailure remembers the last failed reload, so that files left
// broken are neither read nor logged again at every poll.
type reloadFailure struct {
	stamps fileStamps
	err    error
}

// fileStamps are the cert, key and CA files' stat results (nil for no CA
// file).
type fileStamps [3]os.FileInfo

// same reports whether no file changed. The size and modification time
// catch rewrites in place; os.SameFile catches a rename over the file
// (or a symlink swap, as Kubernetes does for mounted secrets) within the
// file system's timestamp granularity.
func (s fileStamps) same(o fileStamps) bool {
	for i := range s {
		a, b := s[i], o[i]
		if a == nil || b == nil {
			if a != b {
				return false
			}
			continue
		}
		if !os.SameFile(a, b) || !a.ModTime().Equal(b.ModTime()) || a.Size() != b.Size() {
			return false
		}
	}
	return true
}

// NewTLSReloader loads cfg's files; a nil logger discards. The files are
// checked as ValidateListeners checks them.
func NewTLSReloader(cfg ListenerTLS, logger *slog.Logger) (*TLSReloader, error) {
	clientAuth, err := cfg.clientAuthType()
	if err != nil {
		return nil, fmt.Errorf("tls.client_auth: %w", err)
	}
	if err := cfg.checkClientCAs(); err != nil {
		return nil, fmt.Errorf("tls.ca_file: %w", err)
	}
	minVersion, err := cfg.minTLSVersion()
	if err != nil {
		return nil, fmt.Errorf("tls.min_version: %w", err)
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("tls: cert_file and key_file are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &TLSReloader{
		cfg:        cfg,
		logger:     logger.With("cert_file", cfg.CertFile),
		clientAuth: clientAuth,
		minVersion: minVersion,
	}
	m, err := r.load()
	if err != nil {
		return nil, err
	}
	r.current.Store(m)
	return r, nil
}

// Config is the server configuration for the listener. Each handshake
// takes the certificate and client CAs current when it starts;
// connections already established keep theirs.
func (r *TLSReloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion: r.minVersion,
		// A whole Config per handshake rather than GetCertificate, so that
		// the client CAs (verification and the CertificateRequest's list of
		// acceptable CAs) change with the certificate. Session ticket keys
		// stay this Config's, so resumption survives a reload; Go checks a
		// resumed session's client chain against the current CAs.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.current.Load().config, nil
		},
	}
}

// Reload loads the files again if any changed since the last load. When
// the new files do not load it keeps serving the previous material and
// returns (and logs, once per broken version of the files) the error.
func (r *TLSReloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamps, err := r.stat()
	if err == nil {
		if stamps.same(r.current.Load().stamps) {
			r.failure = nil
			return nil
		}
		if r.failure != nil && stamps.same(r.failure.stamps) {
			return r.failure.err
		}
		var m *tlsMaterial
		if m, err = r.load(); err == nil {
			r.current.Store(m)
			r.failure = nil
			return nil
		}
	}
	err = fmt.Errorf("TLS files not reloaded, still serving the previous ones: %w", err)
	if r.failure == nil || r.failure.err.Error() != err.Error() {
		r.logger.Error("TLS reload failed; still serving the previous certificate", "err", err)
	}
	r.failure = &reloadFailure{stamps: stamps, err: err}
	return err
}

// Run calls Reload every interval (DefaultTLSReloadInterval when it is
// not positive) until ctx ends. Polling rather than file notifications:
// it needs no dependency, and notifications are unreliable for the
// symlink swaps and network file systems certificates arrive by.
func (r *TLSReloader) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultTLSReloadInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = r.Reload() // logged by Reload
		}
	}
}

func (r *TLSReloader) stat() (fileStamps, error) {
	var s fileStamps
	for i, f := range [...]struct{ field, path string }{
		{"tls.cert_file", r.cfg.CertFile},
		{"tls.key_file", r.cfg.KeyFile},
		{"tls.ca_file", r.cfg.CAFile},
	} {
		if f.path == "" {
			continue
		}
		fi, err := os.Stat(f.path)
		if err != nil {
			return fileStamps{}, &fileError{field: f.field, err: err}
		}
		s[i] = fi
	}
	return s, nil
}

// load reads the files. They are stat'ed first: a file replaced between
// the stat and the read is then read again at the next Reload, rather
// than missed.
func (r *TLSReloader) load() (*tlsMaterial, error) {
	stamps, err := r.stat()
	if err != nil {
		return nil, err
	}
	cert, err := loadKeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	pool, err := loadCAPool(r.cfg.CAFile)
	if err != nil {
		return nil, err
	}
	leaf := cert.Leaf
	r.logger.Info("TLS certificate loaded", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
	if time.Now().After(leaf.NotAfter) {
		r.logger.Warn("TLS certificate has expired; clients will refuse it", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
	}
	return &tlsMaterial{
		stamps: stamps,
		config: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   r.clientAuth,
			ClientCAs:    pool,
			MinVersion:   r.minVersion,
		},
	}, nil
}

// fileError is a loading error and the setting naming the file at fault.
type fileError struct {
	field string
	err   error
}

func (e *fileError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// loadKeyPair reads a PEM certificate chain and its private key.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, &fileError{field: "tls.cert_file", err: err}
	}
	// Checked on its own first, so that a failure of X509KeyPair below is
	// the key's.
	if _, err := parseCertificates(certPEM); err != nil {
		return tls.Certificate{}, &fileError{field: "tls.cert_file", err: fmt.Errorf("%s: %w", certFile, err)}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, &fileError{field: "tls.key_file", err: err}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, &fileError{field: "tls.key_file", err: fmt.Errorf("%s: %w", keyFile, err)}
	}
	return cert, nil
}

// loadCAPool reads a PEM CA bundle; no file is no pool.
func loadCAPool(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, &fileError{field: "tls.ca_file", err: err}
	}
	certs, err := parseCertificates(data)
	if err != nil {
		return nil, &fileError{field: "tls.ca_file", err: fmt.Errorf("%s: %w", caFile, err)}
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// parseCertificates parses every CERTIFICATE block, unlike
// x509.CertPool.AppendCertsFromPEM, which skips the ones it cannot parse:
// a truncated bundle should be an error, not a smaller bundle. Other
// blocks (a private key in a combined file) and text between blocks (as
// openssl writes) are skipped.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}

func (t ListenerTLS) clientAuthType() (tls.ClientAuthType, error) {
	switch t.ClientAuth {
	case "", ClientAuthNone:
		return tls.NoClientCert, nil
	case ClientAuthRequested:
		return tls.VerifyClientCertIfGiven, nil
	case ClientAuthRequired:
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("%q: want none, requested or required", t.ClientAuth)
}

// checkClientCAs refuses client certificates without a CA file: Go would
// verify them against the system's roots, admitting anyone with a
// certificate from a public CA.
func (t ListenerTLS) checkClientCAs() error {
	if (t.ClientAuth == ClientAuthRequested || t.ClientAuth == ClientAuthRequired) && t.CAFile == "" {
		return fmt.Errorf("required when client_auth is %s", t.ClientAuth)
	}
	return nil
}

func (t ListenerTLS) minTLSVersion() (uint16, error) {
	switch t.MinVersion {
	case "", "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("%q: want 1.2 or 1.3", t.MinVersion)
}

// PeerPrincipal is the Kafka principal of a client that presented a
// certificate the handshake verified, as Kafka's
// DefaultKafkaPrincipalBuilder names it with the default
// ssl.principal.mapping.rules: "User:" and the certificate subject as
// Java's X500Principal.getName() prints it (RFC 2253, e.g.
// "User:CN=alice,OU=eng,O=acme,C=US"), so that ACLs written for Kafka
// match. ok is false without a verified client certificate (Kafka's
// User:ANONYMOUS case). A certificate with an empty subject is "User:",
// as in Kafka.
func PeerPrincipal(state tls.ConnectionState) (string, bool) {
	if !state.HandshakeComplete || len(state.VerifiedChains) == 0 || len(state.PeerCertificates) == 0 {
		return "", false
	}
	dn, err := javaRFC2253(state.PeerCertificates[0].RawSubject)
	if err != nil {
		return "", false
	}
	return "User:" + dn, true
}

// rdnSET is one relative distinguished name: encoding/asn1 reads a SET
// OF into a slice type whose name ends in SET. Values stay raw, since
// Java's output depends on their ASN.1 tags, which pkix.Name loses.
type rdnSET []rawAttribute

type rawAttribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// javaRFC2253 formats a DER distinguished name as Java's
// X500Principal.getName() (sun.security.x509.AVA.toRFC2253String) does,
// which differs from Go's pkix.Name.String():
//   - only CN, C, L, ST, O, OU, STREET, DC and UID have keywords; any
//     other attribute (emailAddress, serialNumber, ...) is its dotted OID
//     and '#' with the lowercase hex of its DER encoding;
//   - values of string types other than PrintableString, T61String,
//     IA5String, GeneralString, BMPString and UTF8String are hex too;
//   - the content bytes of those six are decoded as UTF-8 whatever the
//     type, so a BMPString "ab" prints as "\00a\00b" and a T61 byte above
//     0x7f as U+FFFD (Java does the same);
//   - ',', '=', '+', '<', '>', '#', ';', '"' and '\' are escaped with a
//     backslash anywhere in a value, NUL as \00, and leading and trailing
//     spaces and carriage returns with a backslash; nothing else.
//
// Known differences from Java: a malformed UTF-8 sequence may give a
// different number of U+FFFD than Java's decoder, which replaces maximal
// subparts rather than single bytes. The AVAs of a multi-valued RDN keep
// the certificate's (DER-sorted) order, joined by '+', as Java's do. Go
// only accepts DER certificates, so Java's re-encoding of BER values
// before hex-printing them does not arise.
func javaRFC2253(rawSubject []byte) (string, error) {
	var rdns []rdnSET
	rest, err := asn1.Unmarshal(rawSubject, &rdns)
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		return "", errors.New("trailing data after the subject")
	}
	parts := make([]string, 0, len(rdns))
	// RFC 2253 puts the last RDN first.
	for i := len(rdns) - 1; i >= 0; i-- {
		avas := make([]string, 0, len(rdns[i]))
		for _, a := range rdns[i] {
			avas = append(avas, javaAVA(a))
		}
		parts = append(parts, strings.Join(avas, "+"))
	}
	return strings.Join(parts, ","), nil
}

func javaAVA(a rawAttribute) string {
	keyword, ok := rfc2253Keyword(a.Type.String())
	if !ok {
		keyword = a.Type.String()
	}
	if !ok || !javaStringValue(a.Value) {
		return keyword + "=#" + hex.EncodeToString(a.Value.FullBytes)
	}
	const escapees = ",=+<>#;\"\\"
	var escaped []rune
	for _, c := range string(a.Value.Bytes) { // invalid UTF-8 reads as U+FFFD
		switch {
		case strings.ContainsRune(escapees, c):
			escaped = append(escaped, '\\', c)
		case c == 0:
			escaped = append(escaped, '\\', '0', '0')
		default:
			escaped = append(escaped, c)
		}
	}
	lead := 0
	for lead < len(escaped) && (escaped[lead] == ' ' || escaped[lead] == '\r') {
		lead++
	}
	trail := len(escaped) - 1
	for trail >= 0 && (escaped[trail] == ' ' || escaped[trail] == '\r') {
		trail--
	}
	var b strings.Builder
	b.WriteString(keyword)
	b.WriteByte('=')
	for i, c := range escaped {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// rfc2253Keyword is Java's table of the attribute types RFC 2253 names.
func rfc2253Keyword(oid string) (string, bool) {
	switch oid {
	case "2.5.4.3":
		return "CN", true
	case "2.5.4.6":
		return "C", true
	case "2.5.4.7":
		return "L", true
	case "2.5.4.8":
		return "ST", true
	case "2.5.4.10":
		return "O", true
	case "2.5.4.11":
		return "OU", true
	case "2.5.4.9":
		return "STREET", true
	case "0.9.2342.19200300.100.1.25":
		return "DC", true
	case "0.9.2342.19200300.100.1.1":
		return "UID", true
	}
	return "", false
}

// javaStringValue reports whether Java prints the value as text.
func javaStringValue(v asn1.RawValue) bool {
	if v.Class != asn1.ClassUniversal || v.IsCompound {
		return false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String, asn1.TagGeneralString, asn1.TagBMPString, asn1.TagUTF8String:
		return true
	}
	return false
}
