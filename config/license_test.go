package config

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testLicenseSeedHexForTests must equal the seed in license_testkey.go
// (checked by the weirtestlicense-tagged tests).
const testLicenseSeedHexForTests = "2d5f186df9331d0907bc63e489cde6758c97e6336b93f6256dd1e076b46c8aed"

var (
	unitKey  = ed25519.NewKeyFromSeed(fixedSeed(1))
	otherKey = ed25519.NewKeyFromSeed(fixedSeed(2))
	unitKeys = []ed25519.PublicKey{unitKey.Public().(ed25519.PublicKey)}
)

func fixedSeed(b byte) []byte {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = b
	}
	return s
}

func testLicenseSeed(t testing.TB) []byte {
	b, err := hex.DecodeString(testLicenseSeedHexForTests)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signRaw signs an arbitrary payload (padded standard base64).
func signRaw(priv ed25519.PrivateKey, payload string) string {
	p := base64.StdEncoding.EncodeToString([]byte(payload))
	return p + "." + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(p)))
}

// signRawWith signs with a chosen encoding.
func signRawWith(enc *base64.Encoding, priv ed25519.PrivateKey, payload string) string {
	p := enc.EncodeToString([]byte(payload))
	return p + "." + enc.EncodeToString(ed25519.Sign(priv, []byte(p)))
}

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const goodPayload = `{"version":1,"org":"Acme Corp","type":"enterprise","expiry":1798761600}`

func TestParseLicense(t *testing.T) {
	good := signRaw(unitKey, goodPayload)
	payloadPart, sigPart, _ := strings.Cut(good, ".")
	want := License{Version: 1, Org: "Acme Corp", Type: "enterprise", Expiry: time.Unix(1798761600, 0).UTC()}

	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	// A payload re-encoded with a changed field but the original signature.
	tamperedPayload := base64.StdEncoding.EncodeToString([]byte(strings.Replace(goodPayload, "1798761600", "4102444800", 1))) + "." + sigPart

	tests := []struct {
		name string
		text string
		keys []ed25519.PublicKey
		want error // nil: want the license
		msg  string
	}{
		{name: "valid", text: good},
		{name: "valid with surrounding whitespace", text: "\n  " + good + " \r\n"},
		{name: "valid unpadded", text: signRawWith(base64.RawStdEncoding, unitKey, goodPayload)},
		{name: "valid trial", text: signRaw(unitKey, `{"expiry":1798761600,"type":"trial","org":"Acme Corp","version":1}`)},
		{name: "valid among several keys", text: good, keys: []ed25519.PublicKey{otherKey.Public().(ed25519.PublicKey), unitKeys[0]}},
		{name: "tampered payload", text: tamperedPayload, want: ErrLicenseSignature},
		{name: "tampered payload byte", text: flip(payloadPart, 10) + "." + sigPart, want: ErrLicenseSignature},
		{name: "tampered signature", text: payloadPart + "." + flip(sigPart, 5), want: ErrLicenseSignature},
		{name: "wrong signer", text: signRaw(otherKey, goodPayload), want: ErrLicenseSignature},
		{name: "no trusted keys", text: good, keys: []ed25519.PublicKey{}, want: ErrLicenseSignature, msg: "no trusted"},
		{name: "signature over padded form does not cover unpadded", text: strings.TrimRight(payloadPart, "=") + "." + sigPart, want: ErrLicenseSignature},
		{name: "extra field", text: signRaw(unitKey, `{"version":1,"org":"A","type":"enterprise","expiry":1798761600,"seats":10}`), want: ErrLicenseMalformed, msg: `unknown field "seats"`},
		{name: "key in other case", text: signRaw(unitKey, `{"Version":1,"org":"A","type":"enterprise","expiry":1798761600}`), want: ErrLicenseMalformed, msg: `unknown field "Version"`},
		{name: "duplicate field", text: signRaw(unitKey, `{"version":1,"org":"A","type":"trial","type":"enterprise","expiry":1798761600}`), want: ErrLicenseMalformed, msg: "duplicate"},
		{name: "missing org", text: signRaw(unitKey, `{"version":1,"type":"enterprise","expiry":1798761600}`), want: ErrLicenseMalformed, msg: `missing "org"`},
		{name: "missing expiry", text: signRaw(unitKey, `{"version":1,"org":"A","type":"enterprise"}`), want: ErrLicenseMalformed, msg: `missing "expiry"`},
		{name: "null field", text: signRaw(unitKey, `{"version":1,"org":null,"type":"enterprise","expiry":1798761600}`), want: ErrLicenseMalformed, msg: `missing "org"`},
		{name: "wrong version", text: signRaw(unitKey, `{"version":2,"org":"A","type":"enterprise","expiry":1798761600}`), want: ErrLicenseMalformed, msg: "version 2"},
		{name: "version as string", text: signRaw(unitKey, `{"version":"1","org":"A","type":"enterprise","expiry":1798761600}`), want: ErrLicenseMalformed},
		{name: "fractional expiry", text: signRaw(unitKey, `{"version":1,"org":"A","type":"enterprise","expiry":1.5}`), want: ErrLicenseMalformed},
		{name: "wrong type", text: signRaw(unitKey, `{"version":1,"org":"A","type":"platinum","expiry":1798761600}`), want: ErrLicenseMalformed, msg: `"platinum"`},
		{name: "empty org", text: signRaw(unitKey, `{"version":1,"org":"  ","type":"enterprise","expiry":1798761600}`), want: ErrLicenseMalformed, msg: "empty org"},
		{name: "control char in org", text: signRaw(unitKey, `{"version":1,"org":"A\u001b[31m","type":"enterprise","expiry":1798761600}`), want: ErrLicenseMalformed, msg: "control"},
		{name: "zero expiry", text: signRaw(unitKey, `{"version":1,"org":"A","type":"enterprise","expiry":0}`), want: ErrLicenseMalformed, msg: "expiry"},
		{name: "negative expiry", text: signRaw(unitKey, `{"version":1,"org":"A","type":"enterprise","expiry":-5}`), want: ErrLicenseMalformed, msg: "expiry"},
		{name: "huge expiry", text: signRaw(unitKey, `{"version":1,"org":"A","type":"enterprise","expiry":9223372036854775807}`), want: ErrLicenseMalformed, msg: "expiry"},
		{name: "trailing data", text: signRaw(unitKey, goodPayload+`{}`), want: ErrLicenseMalformed},
		{name: "trailing garbage", text: signRaw(unitKey, goodPayload+` x`), want: ErrLicenseMalformed},
		{name: "not an object", text: signRaw(unitKey, `[1,2]`), want: ErrLicenseMalformed, msg: "not a JSON object"},
		{name: "not JSON", text: signRaw(unitKey, `hello`), want: ErrLicenseMalformed},
		{name: "empty", text: "  \n", want: ErrLicenseMalformed, msg: "empty license"},
		{name: "no dot", text: payloadPart + sigPart, want: ErrLicenseMalformed, msg: "exactly one '.'"},
		{name: "two dots", text: good + ".AAAA", want: ErrLicenseMalformed, msg: "exactly one '.'"},
		{name: "empty signature", text: payloadPart + ".", want: ErrLicenseMalformed},
		{name: "empty payload", text: "." + sigPart, want: ErrLicenseMalformed},
		{name: "bad base64 payload", text: "!!!!" + "." + sigPart, want: ErrLicenseMalformed, msg: "payload"},
		{name: "url-safe alphabet", text: signRawWith(base64.URLEncoding, unitKey, `{"version":1,"org":"~~~","type":"enterprise","expiry":1798761600}`), want: ErrLicenseMalformed, msg: "invalid base64 character"},
		{name: "bad base64 signature", text: payloadPart + ".%%%%", want: ErrLicenseMalformed, msg: "signature"},
		{name: "newline inside signature", text: payloadPart + "." + sigPart[:20] + "\n" + sigPart[20:], want: ErrLicenseMalformed, msg: "signature"},
		{name: "wrong padding", text: payloadPart + "." + sigPart + "=", want: ErrLicenseMalformed},
		{name: "short signature", text: payloadPart + "." + base64.StdEncoding.EncodeToString(make([]byte, 32)), want: ErrLicenseMalformed, msg: "signature of 32 bytes"},
		{name: "oversized", text: good + strings.Repeat(" ", MaxLicenseTextSize), want: ErrLicenseMalformed, msg: "larger than"},
		{name: "oversized payload", text: signRaw(unitKey, `{"version":1,"org":"`+strings.Repeat("a", MaxLicenseTextSize)+`","type":"enterprise","expiry":1}`), want: ErrLicenseMalformed, msg: "larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := tc.keys
			if keys == nil {
				keys = unitKeys
			}
			got, err := ParseLicense(tc.text, keys)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("ParseLicense: %v", err)
				}
				if tc.name != "valid trial" && got != want {
					t.Fatalf("got %+v, want %+v", got, want)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %q, want it to mention %q", err, tc.msg)
			}
			if got != (License{}) {
				t.Fatalf("got %+v with an error", got)
			}
		})
	}
}

func TestSignLicenseRoundTrip(t *testing.T) {
	for _, typ := range []string{LicenseTypeTrial, LicenseTypeEnterprise} {
		l := License{Version: 1, Org: "Acme \"Corp\" <ü>", Type: typ, Expiry: time.Unix(1798761600, 0).UTC()}
		text, err := SignLicense(unitKey, l)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(text, ".") != 1 || !strings.HasSuffix(text, "==") {
			t.Fatalf("unexpected text form %q", text)
		}
		got, err := ParseLicense(text, unitKeys)
		if err != nil || got != l {
			t.Fatalf("round trip: %+v, %v; want %+v", got, err, l)
		}
		if _, err := ParseLicense(text, []ed25519.PublicKey{otherKey.Public().(ed25519.PublicKey)}); !errors.Is(err, ErrLicenseSignature) {
			t.Fatalf("other key: %v", err)
		}
	}
	bad := []License{
		{Version: 2, Org: "A", Type: "trial", Expiry: time.Unix(100, 0)},
		{Version: 1, Org: "", Type: "trial", Expiry: time.Unix(100, 0)},
		{Version: 1, Org: "A", Type: "gold", Expiry: time.Unix(100, 0)},
		{Version: 1, Org: "A", Type: "trial"},
		{Version: 1, Org: "A", Type: "trial", Expiry: time.Unix(100, 5)},
	}
	for _, l := range bad {
		if _, err := SignLicense(unitKey, l); err == nil {
			t.Errorf("SignLicense(%+v) succeeded", l)
		}
	}
	if _, err := SignLicense(nil, bad[0]); err == nil {
		t.Error("SignLicense with no key succeeded")
	}
}

func TestTrustedLicenseKeysVendor(t *testing.T) {
	keys := TrustedLicenseKeys()
	if len(keys) == 0 || !keys[0].Equal(vendorLicensePublicKey) || len(keys[0]) != ed25519.PublicKeySize {
		t.Fatalf("vendor key missing: %v", keys)
	}
	// Callers cannot change the trusted set through the returned slice.
	keys[0] = unitKeys[0]
	if !TrustedLicenseKeys()[0].Equal(vendorLicensePublicKey) {
		t.Fatal("TrustedLicenseKeys shares its backing array")
	}
	// A license from an unknown key is refused by the real trust set.
	text := signRaw(unitKey, goodPayload)
	if err := ValidateLicenseBlob([]byte(text)); !errors.Is(err, ErrLicenseSignature) {
		t.Fatalf("ValidateLicenseBlob: %v", err)
	}
}

func TestEvaluateLicense(t *testing.T) {
	day := 24 * time.Hour
	lic := &License{Version: 1, Org: "Acme", Type: "enterprise", Expiry: created.Add(400 * day)}
	tests := []struct {
		name     string
		l        *License
		created  time.Time
		now      time.Time
		status   string
		valid    bool
		typ, org string
		expiry   time.Time
		days     int
		warning  bool
		trial    bool
		loadedEx bool
	}{
		{name: "new cluster: built-in trial", created: created, now: created, status: "trial", valid: true, typ: "trial", expiry: created.Add(30 * day), days: 30, trial: true},
		{name: "trial day 1 warns", created: created, now: created.Add(day), status: "trial", valid: true, typ: "trial", expiry: created.Add(30 * day), days: 29, warning: true, trial: true},
		{name: "trial last second", created: created, now: created.Add(30*day - time.Second), status: "trial", valid: true, typ: "trial", expiry: created.Add(30 * day), days: 0, warning: true, trial: true},
		{name: "trial over exactly at end", created: created, now: created.Add(30 * day), status: "none", expiry: created.Add(30 * day)},
		{name: "no creation time: no trial", now: created, status: "none"},
		{name: "valid license", l: lic, created: created, now: created.Add(day), status: "valid", valid: true, typ: "enterprise", org: "Acme", expiry: lic.Expiry, days: 399},
		{name: "license 30 days left: no warning", l: lic, created: created, now: lic.Expiry.Add(-30 * day), status: "valid", valid: true, typ: "enterprise", org: "Acme", expiry: lic.Expiry, days: 30},
		{name: "license under 30 days left: warning", l: lic, created: created, now: lic.Expiry.Add(-30*day + time.Second), status: "valid", valid: true, typ: "enterprise", org: "Acme", expiry: lic.Expiry, days: 29, warning: true},
		{name: "license last second", l: lic, created: created, now: lic.Expiry.Add(-time.Second), status: "valid", valid: true, typ: "enterprise", org: "Acme", expiry: lic.Expiry, days: 0, warning: true},
		{name: "license expired at expiry", l: lic, created: created, now: lic.Expiry, status: "expired", typ: "enterprise", org: "Acme", expiry: lic.Expiry, loadedEx: true},
		{name: "license expired long ago", l: lic, created: created, now: lic.Expiry.Add(1000 * day), status: "expired", typ: "enterprise", org: "Acme", expiry: lic.Expiry, loadedEx: true},
		{name: "expired license, trial still runs", l: &License{Version: 1, Org: "Acme", Type: "trial", Expiry: created.Add(-day)}, created: created, now: created.Add(2 * day),
			status: "trial", valid: true, typ: "trial", expiry: created.Add(30 * day), days: 28, warning: true, trial: true, loadedEx: true},
		{name: "explicit trial license", l: &License{Version: 1, Org: "Acme", Type: "trial", Expiry: created.Add(60 * day)}, created: created, now: created.Add(40 * day),
			status: "valid", valid: true, typ: "trial", org: "Acme", expiry: created.Add(60 * day), days: 20, warning: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := EvaluateLicense(tc.l, tc.created, tc.now)
			if st.Status != tc.status || st.Valid != tc.valid || st.Type != tc.typ || st.Org != tc.org ||
				!st.Expiry.Equal(tc.expiry) || st.DaysLeft != tc.days || (st.Warning != "") != tc.warning ||
				st.BuiltinTrial != tc.trial || st.LoadedExpired != tc.loadedEx {
				t.Fatalf("got %+v", st)
			}
			if st.Warning != "" && !strings.Contains(st.Warning, "expires in") {
				t.Fatalf("warning %q", st.Warning)
			}
		})
	}
}

// testRegistry is the real registry plus enterprise properties.
func testRegistry() *Registry {
	r := NewRegistry()
	for _, p := range []*Property{
		{Name: "kafka_fetch_read_coalescing_enabled", Kind: KindBool, Default: "false", Enterprise: true},
		{Name: "test_enterprise_int", Kind: KindInt, Default: "0", Min: 0, Max: 100, Enterprise: true},
		{Name: "test_enterprise_mode", Kind: KindString, Default: "off", OneOf: []string{"off", "on"}, Enterprise: true},
	} {
		r.props[p.Name] = p
	}
	return r
}

func TestEnterpriseInUse(t *testing.T) {
	reg := testRegistry()
	tests := []struct {
		values map[string]string
		want   []string
	}{
		{values: nil, want: nil},
		{values: map[string]string{"auto_create_topics_enabled": "true"}, want: nil},
		{values: map[string]string{"kafka_fetch_read_coalescing_enabled": "false"}, want: nil},
		{values: map[string]string{"kafka_fetch_read_coalescing_enabled": "0", "test_enterprise_int": "000"}, want: nil},
		{values: map[string]string{"kafka_fetch_read_coalescing_enabled": "true"}, want: []string{"kafka_fetch_read_coalescing_enabled"}},
		{values: map[string]string{"test_enterprise_mode": "on", "kafka_fetch_read_coalescing_enabled": "1", "test_enterprise_int": "5", "unknown": "x"},
			want: []string{"kafka_fetch_read_coalescing_enabled", "test_enterprise_int", "test_enterprise_mode"}},
	}
	for _, tc := range tests {
		if got := EnterpriseInUse(reg, tc.values); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("EnterpriseInUse(%v) = %v, want %v", tc.values, got, tc.want)
		}
	}
	v, err := NewValues(reg, map[string]string{"kafka_fetch_read_coalescing_enabled": "true", "default_topic_partitions": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.EnterpriseInUse(); !reflect.DeepEqual(got, []string{"kafka_fetch_read_coalescing_enabled"}) {
		t.Errorf("Values.EnterpriseInUse = %v", got)
	}
	if st := EvaluateLicense(nil, time.Time{}, created); !st.Violation(v.EnterpriseInUse()) || st.Violation(nil) {
		t.Error("Violation")
	}
	if st := EvaluateLicense(nil, created, created); st.Violation(v.EnterpriseInUse()) {
		t.Error("Violation during trial")
	}
}

func TestCheckEnterprise(t *testing.T) {
	reg := testRegistry()
	day := 24 * time.Hour
	expiredLic := &License{Version: 1, Org: "Acme", Type: "enterprise", Expiry: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	valid := EvaluateLicense(expiredLic, created, created.Add(40*day))
	trial := EvaluateLicense(nil, created, created.Add(day))
	expired := EvaluateLicense(expiredLic, created, expiredLic.Expiry.Add(day))
	none := EvaluateLicense(nil, created, created.Add(31*day))
	noneNoTrial := EvaluateLicense(nil, time.Time{}, created)
	const feat = "kafka_fetch_read_coalescing_enabled"
	tests := []struct {
		name, prop, value string
		st                LicenseStatus
		msgs              []string // empty: allowed
	}{
		{name: "valid license", prop: feat, value: "true", st: valid},
		{name: "trial", prop: feat, value: "true", st: trial},
		{name: "expired", prop: feat, value: "true", st: expired,
			msgs: []string{feat + " is an enterprise feature and the license is expired (expired 2026-03-01T00:00:00Z)", "weirctl cluster license set"}},
		{name: "none after trial", prop: feat, value: "true", st: none,
			msgs: []string{feat + " is an enterprise feature and there is no license (the built-in trial ended 2026-01-31T00:00:00Z)"}},
		{name: "none, no trial", prop: feat, value: "1", st: noneNoTrial,
			msgs: []string{feat + " is an enterprise feature and there is no license;"}},
		{name: "int feature", prop: "test_enterprise_int", value: "7", st: expired, msgs: []string{"test_enterprise_int is an enterprise feature"}},
		{name: "string feature", prop: "test_enterprise_mode", value: "on", st: none, msgs: []string{"test_enterprise_mode is an enterprise feature"}},
		{name: "turning off is allowed", prop: feat, value: "false", st: expired},
		{name: "default spelled differently", prop: "test_enterprise_int", value: "0", st: none},
		{name: "not enterprise", prop: "auto_create_topics_enabled", value: "true", st: none},
		{name: "unknown property left to validation", prop: "nope", value: "true", st: none},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckEnterprise(reg, tc.prop, tc.value, tc.st)
			if len(tc.msgs) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrLicenseRequired) {
				t.Fatalf("err = %v, want ErrLicenseRequired", err)
			}
			var lre *LicenseRequiredError
			if !errors.As(err, &lre) || lre.Feature != tc.prop {
				t.Fatalf("err = %#v", err)
			}
			for _, m := range tc.msgs {
				if !strings.Contains(err.Error(), m) {
					t.Fatalf("err = %q, want it to contain %q", err, m)
				}
			}
		})
	}
}

func TestEffectiveValue(t *testing.T) {
	reg := testRegistry()
	const feat = "kafka_fetch_read_coalescing_enabled"
	lic := &License{Version: 1, Org: "Acme", Type: "enterprise", Expiry: created.Add(100 * 24 * time.Hour)}
	for _, tc := range []struct {
		now  time.Time
		l    *License
		prop string
		want string
	}{
		{now: created.Add(50 * 24 * time.Hour), l: lic, prop: feat, want: "true"},                                                                // valid
		{now: lic.Expiry, l: lic, prop: feat, want: "false"},                                                                                     // expired: behaves as default
		{now: lic.Expiry, l: &License{Version: 1, Org: "Acme", Type: "enterprise", Expiry: lic.Expiry.Add(time.Hour)}, prop: feat, want: "true"}, // renewed
		{now: lic.Expiry, l: lic, prop: "auto_create_topics_enabled", want: "true"},                                                              // not enterprise
	} {
		st := EvaluateLicense(tc.l, created, tc.now)
		if got := EffectiveValue(reg, tc.prop, "true", st); got != tc.want {
			t.Errorf("EffectiveValue(%s) at %v = %q, want %q", tc.prop, tc.now, got, tc.want)
		}
	}
}

func FuzzParseLicense(f *testing.F) {
	good := signRaw(unitKey, goodPayload)
	f.Add(good)
	f.Add(signRawWith(base64.RawStdEncoding, unitKey, goodPayload))
	f.Add(signRaw(unitKey, `{"version":1,"org":"A","type":"trial","expiry":1,"x":2}`))
	f.Add(signRaw(otherKey, goodPayload))
	f.Add(good + "." + good)
	f.Add("")
	f.Add(".")
	f.Add("====.====")
	f.Fuzz(func(t *testing.T, text string) {
		l, err := ParseLicense(text, unitKeys)
		if err != nil {
			if !errors.Is(err, ErrLicenseMalformed) && !errors.Is(err, ErrLicenseSignature) {
				t.Fatalf("untyped error %v", err)
			}
			if l != (License{}) {
				t.Fatalf("license %+v with error", l)
			}
			return
		}
		// Anything accepted must be a well-formed license signed by unitKey.
		if l.Version != 1 || l.Org == "" || (l.Type != "trial" && l.Type != "enterprise") || l.Expiry.Unix() <= 0 {
			t.Fatalf("accepted a bad license %+v", l)
		}
		if _, err := ParseLicense(text, []ed25519.PublicKey{otherKey.Public().(ed25519.PublicKey)}); err == nil {
			t.Fatal("accepted under a different key")
		}
	})
}
