package sasl

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// SCRAM messages (RFC 5802 section 7) are comma-separated attributes, and
// no attribute value may hold a comma (names escape it as =2C), so
// splitting on commas is exact.

// clientFirst is a parsed client-first-message.
type clientFirst struct {
	gs2Header string // "n,," or "n,a=...,": what client-final's c= encodes
	bare      string // client-first-message-bare, verbatim, for AuthMessage
	user      string // n=, unescaped
	nonce     string // r=
}

// parseClientFirst parses gs2-header client-first-message-bare, refusing
// what weir does not do: channel binding ("y" or "p=" for the flag, as
// Kafka accepts only "n"), a mandatory extension (m=, which RFC 5802 says
// a server that does not know it must refuse; Kafka ignores it) and
// delegation tokens (tokenauth=true). Other extensions are ignored, as
// Kafka does. An authorization id must be the user, as Kafka wants.
func parseClientFirst(msg []byte) (clientFirst, error) {
	s := string(msg)
	flag, rest, ok := strings.Cut(s, ",")
	if !ok {
		return clientFirst{}, fmt.Errorf("%w: SCRAM client-first-message has no GS2 header", ErrMalformed)
	}
	switch {
	case flag == "n":
	case flag == "y" || strings.HasPrefix(flag, "p="):
		return clientFirst{}, fmt.Errorf("%w: SCRAM channel binding (GS2 flag %q)", ErrUnsupported, flag)
	default:
		return clientFirst{}, fmt.Errorf("%w: SCRAM GS2 channel binding flag %q", ErrMalformed, flag)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return clientFirst{}, fmt.Errorf("%w: SCRAM GS2 header is not closed", ErrMalformed)
	}
	var authzid string
	if authz != "" {
		name, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return clientFirst{}, fmt.Errorf("%w: SCRAM GS2 header holds %q, not an authorization id", ErrMalformed, authz)
		}
		var err error
		if authzid, err = decodeSaslname(name); err != nil {
			return clientFirst{}, fmt.Errorf("%w: SCRAM authorization id: %w", ErrMalformed, err)
		}
	}
	cf := clientFirst{gs2Header: s[:len(s)-len(bare)], bare: bare}

	attrs := strings.Split(bare, ",")
	if strings.HasPrefix(attrs[0], "m=") {
		return clientFirst{}, fmt.Errorf("%w: SCRAM mandatory extension %q", ErrUnsupported, attrs[0])
	}
	if len(attrs) < 2 {
		return clientFirst{}, fmt.Errorf("%w: SCRAM client-first-message wants a user name and a nonce", ErrMalformed)
	}
	name, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return clientFirst{}, fmt.Errorf("%w: SCRAM client-first-message starts with %q, not a user name", ErrMalformed, attrs[0])
	}
	var err error
	if cf.user, err = decodeSaslname(name); err != nil {
		return clientFirst{}, fmt.Errorf("%w: SCRAM user name: %w", ErrMalformed, err)
	}
	if cf.nonce, ok = strings.CutPrefix(attrs[1], "r="); !ok || !isPrintable(cf.nonce) {
		return clientFirst{}, fmt.Errorf("%w: SCRAM client nonce %q is not r= and printable characters", ErrMalformed, attrs[1])
	}
	for _, attr := range attrs[2:] {
		key, value, err := parseExtension(attr)
		if err != nil {
			return clientFirst{}, err
		}
		// Kafka reads the flag with Java's Boolean.parseBoolean.
		if key == "tokenauth" && strings.EqualFold(value, "true") {
			return clientFirst{}, fmt.Errorf("%w: delegation tokens (SCRAM tokenauth extension)", ErrUnsupported)
		}
	}
	if authzid != "" && authzid != cf.user {
		return clientFirst{}, fmt.Errorf("%w: authorization id %q is not the user %q", ErrAuthenticationFailed, authzid, cf.user)
	}
	return cf, nil
}

// clientFinal is a parsed client-final-message.
type clientFinal struct {
	channelBinding string // c=, still base64
	nonce          string // r=
	withoutProof   string // client-final-message-without-proof, verbatim
	proof          []byte // p=, decoded
}

// parseClientFinal parses channel-binding "," nonce ["," extensions] ","
// proof. Extensions are checked for form and ignored, as Kafka does.
func parseClientFinal(msg []byte) (clientFinal, error) {
	s := string(msg)
	i := strings.LastIndexByte(s, ',')
	if i < 0 {
		return clientFinal{}, fmt.Errorf("%w: SCRAM client-final-message has no proof", ErrMalformed)
	}
	cf := clientFinal{withoutProof: s[:i]}
	p, ok := strings.CutPrefix(s[i+1:], "p=")
	if !ok {
		return clientFinal{}, fmt.Errorf("%w: SCRAM client-final-message ends with %q, not a proof", ErrMalformed, s[i+1:])
	}
	var err error
	if cf.proof, err = decodeBase64(p); err != nil {
		return clientFinal{}, fmt.Errorf("%w: SCRAM proof: %w", ErrMalformed, err)
	}
	attrs := strings.Split(cf.withoutProof, ",")
	if len(attrs) < 2 {
		return clientFinal{}, fmt.Errorf("%w: SCRAM client-final-message wants channel binding, nonce and proof", ErrMalformed)
	}
	if cf.channelBinding, ok = strings.CutPrefix(attrs[0], "c="); !ok {
		return clientFinal{}, fmt.Errorf("%w: SCRAM client-final-message starts with %q, not channel binding", ErrMalformed, attrs[0])
	}
	if cf.nonce, ok = strings.CutPrefix(attrs[1], "r="); !ok || !isPrintable(cf.nonce) {
		return clientFinal{}, fmt.Errorf("%w: SCRAM nonce %q is not r= and printable characters", ErrMalformed, attrs[1])
	}
	for _, attr := range attrs[2:] {
		if _, _, err := parseExtension(attr); err != nil {
			return clientFinal{}, err
		}
	}
	return cf, nil
}

// serverFirst is server-first-message: nonce, salt and iteration count.
func serverFirst(nonce string, salt []byte, iterations int) string {
	return fmt.Sprintf("r=%s,s=%s,i=%d", nonce, base64.StdEncoding.EncodeToString(salt), iterations)
}

// RFC 5802 server-error-values a failed server-final-message carries.
const (
	errInvalidEncoding = "invalid-encoding"
	errInvalidProof    = "invalid-proof"
	errChannelBindings = "channel-bindings-dont-match"
	errOtherError      = "other-error"
)

// serverError is a failed server-final-message.
func serverError(value string) []byte { return []byte("e=" + value) }

// reservedAttributes are RFC 5802's own attribute names, which may not
// pass for extensions.
const reservedAttributes = "aceimnprsv"

// parseExtension checks an extension attribute: as Kafka, a name of ASCII
// letters (RFC 5802 has one letter; Kafka's tokenauth has nine) other than
// RFC 5802's own attributes, "=", and a non-empty value of UTF-8 without
// NUL or comma.
func parseExtension(attr string) (key, value string, err error) {
	key, value, ok := strings.Cut(attr, "=")
	if !ok || key == "" || value == "" || !isAlpha(key) || !utf8.ValidString(value) || strings.IndexByte(value, 0) >= 0 {
		return "", "", fmt.Errorf("%w: SCRAM extension %q is not name=value", ErrMalformed, attr)
	}
	if len(key) == 1 && strings.Contains(reservedAttributes, key) {
		return "", "", fmt.Errorf("%w: SCRAM attribute %q out of place", ErrMalformed, attr)
	}
	return key, value, nil
}

// decodeSaslname undoes RFC 5802's escaping of "," and "=" in a name
// (=2C, =3D). It wants UTF-8 without NUL, comma or other "=" sequences.
// Kafka wants ASCII names; this accepts the RFC's UTF-8 as well.
func decodeSaslname(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty name")
	}
	if !utf8.ValidString(s) || strings.ContainsAny(s, "\x00,") {
		return "", fmt.Errorf("name %q holds a NUL, a comma or invalid UTF-8", s)
	}
	if strings.IndexByte(s, '=') < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case s[i] != '=':
			b.WriteByte(s[i])
			i++
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
			i += 3
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
			i += 3
		default:
			return "", fmt.Errorf("name %q holds an '=' that is not =2C or =3D", s)
		}
	}
	return b.String(), nil
}

// decodeBase64 decodes padded standard base64, refusing the line breaks
// Go's decoder would skip.
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("line break in base64")
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}

// isPrintableByte is RFC 5802's printable: %x21-7E but ",".
func isPrintableByte(b byte) bool { return b >= 0x21 && b <= 0x7e && b != ',' }

func isPrintable(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if !isPrintableByte(s[i]) {
			return false
		}
	}
	return true
}

func isAlpha(s string) bool {
	for i := range len(s) {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
