package config

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// License text form (see docs/license.md):
//
//	<base64 of a JSON payload>.<base64 of an ed25519 signature>
//
// Both parts use the standard base64 alphabet (RFC 4648 §4, "+/"), with or
// without "=" padding, decoded strictly: no whitespace or line breaks inside
// a part, no other characters, no non-zero trailing bits. Licenses are issued
// padded. The signature is over the ASCII bytes of the first part exactly as
// written, and is checked against the trusted keys before the payload is
// decoded. The payload is a JSON object with exactly the keys "version" (1),
// "org" (non-empty), "type" ("trial" or "enterprise") and "expiry" (Unix
// seconds, > 0).

// MaxLicenseTextSize bounds the license text ParseLicense accepts.
const MaxLicenseTextSize = 16 << 10

// LicenseFormatVersion is the only payload version this release reads.
const LicenseFormatVersion = 1

// License types.
const (
	LicenseTypeTrial      = "trial"
	LicenseTypeEnterprise = "enterprise"
)

// BuiltinTrialPeriod is how long a new cluster may use enterprise features
// without a license, counted from the cluster's creation time.
const BuiltinTrialPeriod = 30 * 24 * time.Hour

// LicenseWarningPeriod: with fewer than this left, the status carries a warning.
const LicenseWarningPeriod = 30 * 24 * time.Hour

// maxLicenseExpiry is 9999-12-31T23:59:59Z, the latest expiry accepted.
const maxLicenseExpiry = 253402300799

// Errors returned by ParseLicense (wrapped with detail) and CheckEnterprise.
var (
	// ErrLicenseMalformed: the text is not a well-formed license (size,
	// shape, base64, JSON schema).
	ErrLicenseMalformed = errors.New("malformed license")
	// ErrLicenseSignature: the signature does not verify against any
	// trusted key (tampered, or signed by someone else).
	ErrLicenseSignature = errors.New("license signature does not verify")
	// ErrLicenseRequired: an enterprise feature needs a valid license.
	ErrLicenseRequired = errors.New("enterprise license required")
)

// License is a verified license payload.
type License struct {
	Version int
	Org     string
	Type    string    // LicenseTypeTrial or LicenseTypeEnterprise
	Expiry  time.Time // UTC, whole seconds; the license is valid before it
}

// licensePayload is the wire form. Pointers tell a missing (or null) field
// from a zero one.
type licensePayload struct {
	Version *int    `json:"version"`
	Org     *string `json:"org"`
	Type    *string `json:"type"`
	Expiry  *int64  `json:"expiry"`
}

var licenseKeys = []string{"version", "org", "type", "expiry"}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrLicenseMalformed, fmt.Sprintf(format, args...))
}

// ParseLicense verifies and decodes a license in text form. Surrounding
// whitespace is ignored. The signature must verify against one of keys
// before the payload is decoded; errors wrap ErrLicenseMalformed or
// ErrLicenseSignature. ParseLicense does not look at the clock: an expired
// license parses (EvaluateLicense judges expiry).
func ParseLicense(text string, keys []ed25519.PublicKey) (License, error) {
	if len(text) > MaxLicenseTextSize {
		return License{}, malformed("license of %d bytes is larger than %d", len(text), MaxLicenseTextSize)
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return License{}, malformed("empty license")
	}
	payloadB64, sigB64, ok := strings.Cut(text, ".")
	if !ok || strings.Contains(sigB64, ".") {
		return License{}, malformed("want <payload>.<signature> with exactly one '.', found %d", strings.Count(text, "."))
	}
	if payloadB64 == "" || sigB64 == "" {
		return License{}, malformed("empty payload or signature part")
	}
	// Check the payload's alphabet now (cheap, no parsing); decode it only
	// once the signature verifies.
	if err := checkBase64(payloadB64); err != nil {
		return License{}, malformed("payload: %v", err)
	}
	sig, err := decodeBase64(sigB64)
	if err != nil {
		return License{}, malformed("signature: %v", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return License{}, malformed("signature of %d bytes, want %d", len(sig), ed25519.SignatureSize)
	}
	if !verifyAny(keys, []byte(payloadB64), sig) {
		if len(keys) == 0 {
			return License{}, fmt.Errorf("%w: no trusted license keys", ErrLicenseSignature)
		}
		return License{}, fmt.Errorf("%w: tampered, or not signed by a trusted key", ErrLicenseSignature)
	}
	payload, err := decodeBase64(payloadB64)
	if err != nil {
		return License{}, malformed("payload: %v", err)
	}
	return decodeLicensePayload(payload)
}

func verifyAny(keys []ed25519.PublicKey, msg, sig []byte) bool {
	for _, k := range keys {
		if len(k) == ed25519.PublicKeySize && ed25519.Verify(k, msg, sig) {
			return true
		}
	}
	return false
}

// checkBase64 accepts only the standard alphabet with at most two trailing
// '=' (Go's decoders would otherwise skip '\r' and '\n').
func checkBase64(s string) error {
	body := strings.TrimRight(s, "=")
	if pad := len(s) - len(body); pad > 2 {
		return fmt.Errorf("too much base64 padding")
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			return fmt.Errorf("invalid base64 character %q at offset %d", c, i)
		}
	}
	return nil
}

// decodeBase64 decodes standard base64, padded or not, strictly.
func decodeBase64(s string) ([]byte, error) {
	if err := checkBase64(s); err != nil {
		return nil, err
	}
	enc := base64.RawStdEncoding.Strict()
	if strings.HasSuffix(s, "=") {
		enc = base64.StdEncoding.Strict()
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("invalid base64: %v", err)
	}
	return b, nil
}

func decodeLicensePayload(payload []byte) (License, error) {
	if err := checkLicenseKeys(payload); err != nil {
		return License{}, err
	}
	var p licensePayload
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return License{}, malformed("payload: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return License{}, malformed("payload: trailing data after the JSON object")
	}
	switch {
	case p.Version == nil:
		return License{}, malformed("payload: missing \"version\"")
	case p.Org == nil:
		return License{}, malformed("payload: missing \"org\"")
	case p.Type == nil:
		return License{}, malformed("payload: missing \"type\"")
	case p.Expiry == nil:
		return License{}, malformed("payload: missing \"expiry\"")
	}
	l := License{Version: *p.Version, Org: *p.Org, Type: *p.Type}
	if err := validateLicenseFields(l.Version, l.Org, l.Type, *p.Expiry); err != nil {
		return License{}, err
	}
	l.Expiry = time.Unix(*p.Expiry, 0).UTC()
	return l, nil
}

// checkLicenseKeys walks the payload's top level: it must be one object
// whose keys are exactly licenseKeys, each once, spelled exactly
// (encoding/json alone would match keys case-insensitively and let a
// duplicate key win silently).
func checkLicenseKeys(payload []byte) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	tok, err := dec.Token()
	if err != nil {
		return malformed("payload: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return malformed("payload is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return malformed("payload: %v", err)
		}
		key, _ := tok.(string)
		known := false
		for _, k := range licenseKeys {
			known = known || key == k
		}
		if !known {
			return malformed("payload: unknown field %q", key)
		}
		if seen[key] {
			return malformed("payload: duplicate field %q", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return malformed("payload: %v", err)
		}
	}
	for _, k := range licenseKeys {
		if !seen[k] {
			return malformed("payload: missing %q", k)
		}
	}
	return nil
}

func validateLicenseFields(version int, org, typ string, expiry int64) error {
	if version != LicenseFormatVersion {
		return malformed("unsupported license version %d, want %d", version, LicenseFormatVersion)
	}
	if typ != LicenseTypeTrial && typ != LicenseTypeEnterprise {
		return malformed("license type %q, want %q or %q", typ, LicenseTypeTrial, LicenseTypeEnterprise)
	}
	if strings.TrimSpace(org) == "" {
		return malformed("empty org")
	}
	if !utf8.ValidString(org) || strings.ContainsFunc(org, unicode.IsControl) {
		return malformed("org contains invalid or control characters")
	}
	if expiry <= 0 || expiry > maxLicenseExpiry {
		return malformed("expiry %d out of range (1..%d)", expiry, maxLicenseExpiry)
	}
	return nil
}

// SignLicense returns the text form of l signed with priv. It refuses a
// license ParseLicense would refuse. The vendor's private key is not part
// of weir; tests sign with their own keys (see SignTestLicense).
func SignLicense(priv ed25519.PrivateKey, l License) (string, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return "", fmt.Errorf("license signing key of %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	if l.Expiry.Nanosecond() != 0 {
		return "", malformed("expiry must be whole seconds")
	}
	exp := l.Expiry.Unix()
	if err := validateLicenseFields(l.Version, l.Org, l.Type, exp); err != nil {
		return "", err
	}
	payload, err := json.Marshal(licensePayload{Version: &l.Version, Org: &l.Org, Type: &l.Type, Expiry: &exp})
	if err != nil {
		return "", err
	}
	p := base64.StdEncoding.EncodeToString(payload)
	sig := ed25519.Sign(priv, []byte(p))
	return p + "." + base64.StdEncoding.EncodeToString(sig), nil
}

// ValidateLicenseBlob verifies a license blob against TrustedLicenseKeys.
// It does not look at the clock, so it is pure and fits the controller's
// Options.ValidateLicense hook.
func ValidateLicenseBlob(blob []byte) error {
	_, err := ParseLicense(string(blob), TrustedLicenseKeys())
	return err
}

// License statuses.
const (
	LicenseStatusValid   = "valid"   // a loaded license that has not expired
	LicenseStatusTrial   = "trial"   // no valid loaded license; the built-in trial runs
	LicenseStatusExpired = "expired" // a loaded license expired, the built-in trial is over
	LicenseStatusNone    = "none"    // no license loaded, the built-in trial is over
)

// LicenseStatus is the license situation of a cluster at one instant.
type LicenseStatus struct {
	// Status is one of the LicenseStatus* constants.
	Status string
	// Valid reports whether enterprise features may take effect.
	Valid bool
	// Org and Type are the loaded license's (Type "trial" and no Org for
	// the built-in trial; empty for none).
	Org  string
	Type string
	// Expiry is when the license in effect ends (or ended). For "none" it
	// is the end of the built-in trial, zero if the creation time is unknown.
	Expiry time.Time
	// DaysLeft is the whole days (rounded down) until Expiry; 0 unless Valid.
	DaysLeft int
	// Warning is set when Valid and fewer than 30 days remain.
	Warning string
	// BuiltinTrial is set when the status comes from the built-in trial.
	BuiltinTrial bool
	// LoadedExpired is set when a loaded license has expired, even if the
	// built-in trial still runs.
	LoadedExpired bool
}

// EvaluateLicense judges the license at now. The rule: a loaded license
// (l != nil, already verified) that has not expired (now < Expiry) is in
// effect; failing that, the built-in trial runs for BuiltinTrialPeriod
// from clusterCreated (a zero clusterCreated grants no trial); failing
// that, enterprise features do not take effect: status "expired" if a
// license was loaded, "none" if not.
func EvaluateLicense(l *License, clusterCreated time.Time, now time.Time) LicenseStatus {
	var trialEnd time.Time
	if !clusterCreated.IsZero() {
		trialEnd = clusterCreated.Add(BuiltinTrialPeriod).UTC()
	}
	var st LicenseStatus
	switch {
	case l != nil && now.Before(l.Expiry):
		st = LicenseStatus{Status: LicenseStatusValid, Valid: true, Org: l.Org, Type: l.Type, Expiry: l.Expiry}
	case !trialEnd.IsZero() && now.Before(trialEnd):
		st = LicenseStatus{Status: LicenseStatusTrial, Valid: true, Type: LicenseTypeTrial, Expiry: trialEnd,
			BuiltinTrial: true, LoadedExpired: l != nil}
	case l != nil:
		return LicenseStatus{Status: LicenseStatusExpired, Org: l.Org, Type: l.Type, Expiry: l.Expiry, LoadedExpired: true}
	default:
		return LicenseStatus{Status: LicenseStatusNone, Expiry: trialEnd}
	}
	left := st.Expiry.Sub(now)
	st.DaysLeft = int(left / (24 * time.Hour))
	if left < LicenseWarningPeriod {
		what := "the license"
		if st.BuiltinTrial {
			what = "the built-in trial"
		}
		st.Warning = fmt.Sprintf("%s expires in %s (%s); set a license with 'weirctl cluster license set'",
			what, daysText(st.DaysLeft), st.Expiry.UTC().Format(time.RFC3339))
	}
	return st
}

func daysText(n int) string {
	switch n {
	case 0:
		return "less than a day"
	case 1:
		return "1 day"
	}
	return strconv.Itoa(n) + " days"
}

// Describe says in a few words why enterprise features do or do not take
// effect, e.g. "the license is expired (expired 2026-01-02T00:00:00Z)".
func (s LicenseStatus) Describe() string {
	exp := s.Expiry.UTC().Format(time.RFC3339)
	switch s.Status {
	case LicenseStatusValid:
		return fmt.Sprintf("the %s license of %s is valid until %s", s.Type, s.Org, exp)
	case LicenseStatusTrial:
		return fmt.Sprintf("the built-in trial runs until %s", exp)
	case LicenseStatusExpired:
		return fmt.Sprintf("the license is expired (expired %s)", exp)
	}
	if s.Expiry.IsZero() {
		return "there is no license"
	}
	return fmt.Sprintf("there is no license (the built-in trial ended %s)", exp)
}

// Violation reports whether enterprise features are in use (inUse, from
// EnterpriseInUse) without a valid license; they then behave as their
// defaults.
func (s LicenseStatus) Violation(inUse []string) bool {
	return !s.Valid && len(inUse) > 0
}

// isDefault reports whether value means the property's default (so
// "0" and "false" are both the default of a false boolean).
func isDefault(p *Property, value string) bool {
	switch p.Kind {
	case KindBool:
		a, errA := strconv.ParseBool(value)
		b, errB := strconv.ParseBool(p.Default)
		if errA == nil && errB == nil {
			return a == b
		}
	case KindInt:
		a, errA := strconv.ParseInt(value, 10, 64)
		b, errB := strconv.ParseInt(p.Default, 10, 64)
		if errA == nil && errB == nil {
			return a == b
		}
	}
	return value == p.Default
}

// EnterpriseInUse lists, sorted, the enterprise properties that values
// (explicitly set properties) set to something other than their default:
// the enterprise features in use.
func EnterpriseInUse(reg *Registry, values map[string]string) []string {
	var names []string
	for name, value := range values {
		if p, ok := reg.Lookup(name); ok && p.Enterprise && !isDefault(p, value) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// EnterpriseInUse lists, sorted, the enterprise features the current
// values use.
func (v *Values) EnterpriseInUse() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return EnterpriseInUse(v.reg, v.set)
}

// CheckEnterprise refuses (with a *LicenseRequiredError, which wraps
// ErrLicenseRequired and names the feature and the license status) setting an enterprise
// property to a non-default value while st is not Valid. Turning a
// feature off, and every non-enterprise or unknown property, is left to
// the usual validation.
func CheckEnterprise(reg *Registry, name, value string, st LicenseStatus) error {
	p, ok := reg.Lookup(name)
	if !ok || !p.Enterprise || st.Valid || isDefault(p, value) {
		return nil
	}
	return &LicenseRequiredError{Feature: name, Status: st}
}

// LicenseRequiredError is CheckEnterprise's refusal; errors.Is(err,
// ErrLicenseRequired) holds.
type LicenseRequiredError struct {
	Feature string // the enterprise property
	Status  LicenseStatus
}

func (e *LicenseRequiredError) Error() string {
	return fmt.Sprintf("%s is an enterprise feature and %s; set a valid license with 'weirctl cluster license set'",
		e.Feature, e.Status.Describe())
}

func (e *LicenseRequiredError) Unwrap() error { return ErrLicenseRequired }

// EffectiveValue is the value a property takes effect with: an enterprise
// property behaves as its default while st is not Valid (its stored value
// is kept and takes effect again once a valid license returns).
func EffectiveValue(reg *Registry, name, value string, st LicenseStatus) string {
	if p, ok := reg.Lookup(name); ok && p.Enterprise && !st.Valid {
		return p.Default
	}
	return value
}
