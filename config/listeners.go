package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Listener is one Kafka listener of a node: a bind address with its own
// security protocol, as Kafka's listeners, advertised.listeners and
// listener.security.protocol.map describe together. The koanf tags name
// the YAML keys; read them with ParseListeners, which refuses unknown keys
// (koanf's Unmarshal drops them silently), and check them with
// ValidateListeners.
type Listener struct {
	// Name identifies the listener ("internal", "external"). Kafka
	// upper-cases listener names, so names differing only in case are
	// the same listener and refused as duplicates.
	Name string `koanf:"name"`
	// Address is the host:port to bind; an empty host or 0.0.0.0 binds
	// every interface.
	Address string `koanf:"address"`
	// AdvertisedAddress is the host:port clients are told to connect
	// to; empty means Address (see Advertised).
	AdvertisedAddress string `koanf:"advertised_address"`
	// SecurityProtocol is Kafka's security.protocol of the listener.
	// ParseListeners takes it from the name when the name is a protocol
	// ("SSL"), as Kafka's default listener.security.protocol.map does.
	SecurityProtocol SecurityProtocol `koanf:"security_protocol"`
	// SASLMechanisms are the mechanisms a SASL_* listener offers
	// (Kafka's sasl.enabled.mechanisms), spelled as clients send them.
	SASLMechanisms []string `koanf:"sasl_mechanisms"`
	// TLS is the listener's certificate and client authentication, for
	// SSL and SASL_SSL listeners only.
	TLS *ListenerTLS `koanf:"tls"`
}

// ListenerTLS is the TLS material of a listener, read from PEM files so
// that it can be replaced while the broker runs (see TLSReloader).
type ListenerTLS struct {
	// CertFile holds the certificate chain, leaf first; KeyFile its
	// private key (both may name one file holding both).
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// CAFile holds the CAs client certificates must chain to; required
	// when ClientAuth is requested or required, since without it any
	// certificate of a publicly trusted CA would be accepted.
	CAFile string `koanf:"ca_file"`
	// ClientAuth is Kafka's ssl.client.auth: none (empty), requested or
	// required.
	ClientAuth string `koanf:"client_auth"`
	// MinVersion is the oldest TLS version accepted: 1.2 (empty) or 1.3.
	MinVersion string `koanf:"min_version"`
}

// SecurityProtocol is Kafka's security.protocol.
type SecurityProtocol string

// Kafka's security protocols.
const (
	ProtocolPlaintext     SecurityProtocol = "PLAINTEXT"
	ProtocolSSL           SecurityProtocol = "SSL"
	ProtocolSASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	ProtocolSASLSSL       SecurityProtocol = "SASL_SSL"
)

// SASL mechanisms a listener may offer.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// Kafka's ssl.client.auth values.
const (
	ClientAuthNone      = "none"
	ClientAuthRequested = "requested"
	ClientAuthRequired  = "required"
)

// Known reports whether p is one of Kafka's four protocols.
func (p SecurityProtocol) Known() bool {
	switch p {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		return true
	}
	return false
}

// UsesTLS reports whether connections to the listener are TLS.
func (p SecurityProtocol) UsesTLS() bool { return p == ProtocolSSL || p == ProtocolSASLSSL }

// UsesSASL reports whether clients authenticate with SASL.
func (p SecurityProtocol) UsesSASL() bool {
	return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL
}

// Advertised is the address clients are told: AdvertisedAddress, or
// Address when it is empty.
func (l Listener) Advertised() string {
	if l.AdvertisedAddress != "" {
		return l.AdvertisedAddress
	}
	return l.Address
}

// ListenerError is one problem with one setting of one listener.
type ListenerError struct {
	Index int    // position in the listeners list
	Name  string // the listener's name, when it has one
	Field string // the key as YAML spells it: "address", "tls.cert_file"
	Err   error
}

func (e *ListenerError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("listener %q: %s: %v", e.Name, e.Field, e.Err)
	}
	return fmt.Sprintf("listeners[%d]: %s: %v", e.Index, e.Field, e.Err)
}

func (e *ListenerError) Unwrap() error { return e.Err }

// ParseListeners reads the listeners key as koanf hands it over from YAML
// (a list of maps; nil when absent). It checks shapes and keys, not
// values: call ValidateListeners on the result. Protocol names and
// client_auth are case-insensitive, as in Kafka; SASL mechanisms are not.
func ParseListeners(v any) ([]Listener, error) {
	var items []any
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		items = x
	case []map[string]any:
		for _, m := range x {
			items = append(items, m)
		}
	default:
		return nil, fmt.Errorf("listeners: want a list of maps, got %T", v)
	}
	listeners := make([]Listener, 0, len(items))
	var errs []error
	for i, item := range items {
		l, lerrs := parseListener(i, item)
		listeners = append(listeners, l)
		errs = append(errs, lerrs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return listeners, nil
}

func parseListener(i int, item any) (Listener, []error) {
	m, err := stringMap(item)
	if err != nil {
		return Listener{}, []error{fmt.Errorf("listeners[%d]: %w", i, err)}
	}
	var l Listener
	var errs []error
	fail := func(field string, err error) {
		errs = append(errs, &ListenerError{Index: i, Name: l.Name, Field: field, Err: err})
	}
	// The name first, so that every other error can name the listener.
	if l.Name, err = stringValue(m["name"]); err != nil {
		fail("name", err)
	}
	for _, key := range sortedKeys(m) {
		v := m[key]
		var err error
		switch key {
		case "name":
		case "address":
			l.Address, err = stringValue(v)
		case "advertised_address":
			l.AdvertisedAddress, err = stringValue(v)
		case "security_protocol":
			var s string
			s, err = stringValue(v)
			l.SecurityProtocol = SecurityProtocol(strings.ToUpper(s))
		case "sasl_mechanisms":
			l.SASLMechanisms, err = stringList(v)
		case "tls":
			l.TLS = parseListenerTLS(v, fail)
		default:
			err = errors.New("unknown key; want name, address, advertised_address, security_protocol, sasl_mechanisms or tls")
		}
		if err != nil {
			fail(key, err)
		}
	}
	if p := SecurityProtocol(strings.ToUpper(l.Name)); l.SecurityProtocol == "" && p.Known() {
		l.SecurityProtocol = p
	}
	return l, errs
}

func parseListenerTLS(v any, fail func(field string, err error)) *ListenerTLS {
	if v == nil {
		return nil
	}
	m, err := stringMap(v)
	if err != nil {
		fail("tls", err)
		return nil
	}
	var t ListenerTLS
	for _, key := range sortedKeys(m) {
		var err error
		switch key {
		case "cert_file":
			t.CertFile, err = stringValue(m[key])
		case "key_file":
			t.KeyFile, err = stringValue(m[key])
		case "ca_file":
			t.CAFile, err = stringValue(m[key])
		case "client_auth":
			t.ClientAuth, err = stringValue(m[key])
			t.ClientAuth = strings.ToLower(t.ClientAuth)
		case "min_version":
			// An unquoted 1.3 arrives from YAML as a float.
			t.MinVersion, err = stringValue(m[key])
		default:
			err = errors.New("unknown key; want cert_file, key_file, ca_file, client_auth or min_version")
		}
		if err != nil {
			fail("tls."+key, err)
		}
	}
	return &t
}

// stringMap accepts the map types YAML decoders produce.
func stringMap(v any) (map[string]any, error) {
	switch x := v.(type) {
	case map[string]any:
		return x, nil
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, v := range x {
			s, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("want a map with string keys, got key %v (%T)", k, k)
			}
			m[s] = v
		}
		return m, nil
	}
	return nil, fmt.Errorf("want a map, got %T", v)
}

// sortedKeys makes error lists come out in the same order every time.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// stringValue reads a scalar as text: YAML types unquoted numbers, and a
// port or a version is as likely to be written bare as quoted.
func stringValue(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(x), nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), nil
	}
	return "", fmt.Errorf("want a string, got %T", v)
}

// stringList reads a YAML list of strings, or one comma-separated string
// as environment variables and flags give lists.
func stringList(v any) ([]string, error) {
	var parts []string
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		parts = strings.Split(x, ",")
	case []string:
		parts = x
	case []any:
		for _, e := range x {
			s, err := stringValue(e)
			if err != nil {
				return nil, err
			}
			parts = append(parts, s)
		}
	default:
		return nil, fmt.Errorf("want a list of strings, got %T", v)
	}
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// ValidateListeners reports every problem of every listener at once, each
// a *ListenerError naming the listener and the setting. It reads the TLS
// files, so that a broker with a missing or broken certificate refuses to
// start instead of failing its first handshake. An empty list is valid.
func ValidateListeners(listeners []Listener) error {
	var errs []error
	for i, l := range listeners {
		errs = append(errs, validateListener(i, l)...)
	}
	errs = append(errs, validateDistinct(listeners)...)
	return errors.Join(errs...)
}

func validateListener(i int, l Listener) []error {
	var errs []error
	fail := func(field string, err error) {
		errs = append(errs, &ListenerError{Index: i, Name: l.Name, Field: field, Err: err})
	}
	switch {
	case l.Name == "":
		fail("name", errors.New("required"))
	case !validListenerName(l.Name):
		fail("name", fmt.Errorf("%q: want letters, digits, '_' and '-'", l.Name))
	}
	if _, _, err := splitAddress(l.Address); err != nil {
		fail("address", fmt.Errorf("%q: %w", l.Address, err))
	}
	validateAdvertised(l, fail)

	p := l.SecurityProtocol
	switch {
	case p == "":
		fail("security_protocol", errors.New("required: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"))
	case !p.Known():
		fail("security_protocol", fmt.Errorf("%q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", p))
	}

	switch {
	case p.UsesSASL() && len(l.SASLMechanisms) == 0:
		fail("sasl_mechanisms", fmt.Errorf("required for %s: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", p))
	case p.Known() && !p.UsesSASL() && len(l.SASLMechanisms) > 0:
		fail("sasl_mechanisms", fmt.Errorf("only for SASL_PLAINTEXT and SASL_SSL listeners, not %s", p))
	}
	seen := map[string]bool{}
	for _, m := range l.SASLMechanisms {
		switch {
		case m != MechanismPlain && m != MechanismSCRAMSHA256 && m != MechanismSCRAMSHA512:
			fail("sasl_mechanisms", fmt.Errorf("%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (as clients spell them)", m))
		case seen[m]:
			fail("sasl_mechanisms", fmt.Errorf("%q: listed twice", m))
		}
		seen[m] = true
	}

	switch {
	case p.UsesTLS() && l.TLS == nil:
		fail("tls", fmt.Errorf("required for %s", p))
	case p.Known() && !p.UsesTLS() && l.TLS != nil:
		// Its files are not checked: they would not be used.
		fail("tls", fmt.Errorf("only for SSL and SASL_SSL listeners, not %s", p))
	case l.TLS != nil:
		validateListenerTLS(*l.TLS, fail)
	}
	return errs
}

func validateAdvertised(l Listener, fail func(field string, err error)) {
	addr, from := l.Advertised(), ""
	if l.AdvertisedAddress == "" {
		if _, _, err := splitAddress(l.Address); err != nil {
			return // reported for address
		}
		from = " (address, as advertised_address is empty)"
	}
	host, port, err := splitAddress(addr)
	switch {
	case err != nil:
		fail("advertised_address", fmt.Errorf("%q: %w", addr, err))
	case host == "" || isUnspecified(host):
		fail("advertised_address", fmt.Errorf("%q%s: clients cannot connect to an unspecified address; set the address they should use", addr, from))
	case port == 0:
		fail("advertised_address", fmt.Errorf("%q%s: clients cannot connect to port 0; set the port they should use", addr, from))
	}
}

func validateListenerTLS(t ListenerTLS, fail func(field string, err error)) {
	if t.CertFile == "" {
		fail("tls.cert_file", errors.New("required"))
	}
	if t.KeyFile == "" {
		fail("tls.key_file", errors.New("required"))
	}
	if t.CertFile != "" && t.KeyFile != "" {
		if _, err := loadKeyPair(t.CertFile, t.KeyFile); err != nil {
			failFile(err, fail)
		}
	}
	if t.CAFile != "" {
		if _, err := loadCAPool(t.CAFile); err != nil {
			failFile(err, fail)
		}
	}
	if _, err := t.clientAuthType(); err != nil {
		fail("tls.client_auth", err)
	}
	if err := t.checkClientCAs(); err != nil {
		fail("tls.ca_file", err)
	}
	if _, err := t.minTLSVersion(); err != nil {
		fail("tls.min_version", err)
	}
}

// failFile reports a loading error on the file it is about.
func failFile(err error, fail func(field string, err error)) {
	var fe *fileError
	if errors.As(err, &fe) {
		fail(fe.field, fe.err)
		return
	}
	fail("tls", err)
}

// validateDistinct refuses names Kafka would take for one listener, and
// bind addresses the second of which could not be bound.
func validateDistinct(listeners []Listener) []error {
	var errs []error
	for j, b := range listeners {
		for i, a := range listeners[:j] {
			if a.Name != "" && strings.EqualFold(a.Name, b.Name) {
				errs = append(errs, &ListenerError{Index: j, Name: b.Name, Field: "name",
					Err: fmt.Errorf("duplicate of listeners[%d] %q (names are case-insensitive)", i, a.Name)})
				break
			}
		}
		for i, a := range listeners[:j] {
			if addressesConflict(a.Address, b.Address) {
				errs = append(errs, &ListenerError{Index: j, Name: b.Name, Field: "address",
					Err: fmt.Errorf("%q: conflicts with listeners[%d] %q's address %q", b.Address, i, a.Name, a.Address)})
				break
			}
		}
	}
	return errs
}

// addressesConflict reports whether binding both addresses would fail:
// the same port on the same host, or on any host when either is a
// wildcard (Go listens on a dual-stack socket for 0.0.0.0 and ::, so
// those take the port on every address of both families). Port 0 binds
// a free port and never conflicts. Host names are not resolved.
func addressesConflict(a, b string) bool {
	ha, pa, errA := splitAddress(a)
	hb, pb, errB := splitAddress(b)
	if errA != nil || errB != nil || pa != pb || pa == 0 {
		return false
	}
	if ha == "" || hb == "" || isUnspecified(ha) || isUnspecified(hb) {
		return true
	}
	return canonicalHost(ha) == canonicalHost(hb)
}

// splitAddress splits host:port, the port a number as Kafka requires
// (Go would also look up service names such as "http").
func splitAddress(addr string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return host, uint16(n), nil
}

func isUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// canonicalHost makes spellings of one IP address (::1 and
// 0:0:0:0:0:0:0:1, ::ffff:127.0.0.1 and 127.0.0.1) compare equal.
func canonicalHost(host string) string {
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return strings.ToLower(host)
}

// validListenerName keeps names usable where they will appear: metric
// labels, log fields and Kafka's listener.name.<name>.* keys.
func validListenerName(name string) bool {
	for _, r := range name {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return name != ""
}
