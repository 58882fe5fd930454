package broker

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
)

const coalescing = "kafka_fetch_read_coalescing_enabled"

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// licenseBroker opens a single-node broker that trusts key, with clock.
func licenseBroker(t *testing.T, dir string, clock *fakeClock, key ed25519.PublicKey) *Broker {
	t.Helper()
	b, err := Open(Options{Node: testNode(dir), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: clock.Now, LicenseKeys: []ed25519.PublicKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func newLicenseKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func signLicense(t *testing.T, priv ed25519.PrivateKey, org string, expiry time.Time) string {
	t.Helper()
	text, err := config.SignLicense(priv, config.License{Version: config.LicenseFormatVersion, Org: org,
		Type: config.LicenseTypeEnterprise, Expiry: expiry.Truncate(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// watchValues records a property's effective values as its watcher sees them.
type watchValues struct {
	mu     sync.Mutex
	values []string
}

func (w *watchValues) add(v string) {
	w.mu.Lock()
	w.values = append(w.values, v)
	w.mu.Unlock()
}

func (w *watchValues) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.values, ",")
}

func setCoalescing(b *Broker, on bool) error {
	v := "false"
	if on {
		v = "true"
	}
	return b.AlterClusterProperties([]PropertyChange{{Name: coalescing, Value: v}}, false)
}

// TestLicenseTrialExpiryAndRenewal walks an enterprise feature through a
// cluster's license life with an injected clock: on during the built-in
// trial, quietly off (value kept, watchers told, no failed request) when
// the trial ends, refused while there is no license, back on with a valid
// license without a restart, off again when that license expires, and the
// license kept across a restart.
func TestLicenseTrialExpiryAndRenewal(t *testing.T) {
	clock := newFakeClock()
	pub, priv := newLicenseKey(t)
	dir := t.TempDir()
	b := licenseBroker(t, dir, clock, pub)

	st := b.LicenseStatus()
	if st.Status != config.LicenseStatusTrial || !st.Valid || !st.BuiltinTrial || st.DaysLeft < 29 || st.DaysLeft > 30 {
		t.Fatalf("new cluster: %+v, want the 30-day built-in trial", st)
	}
	var seen watchValues
	stop := b.WatchProperty(coalescing, seen.add)
	defer stop()

	if err := setCoalescing(b, true); err != nil {
		t.Fatalf("enable during the trial: %v", err)
	}
	if !b.EffectiveBool(coalescing) || seen.String() != "false,true" {
		t.Fatalf("during the trial: effective %v, watcher saw %s", b.EffectiveBool(coalescing), seen.String())
	}
	if info := b.LicenseInfo(); info.Violation || len(info.InUse) != 1 {
		t.Fatalf("trial info %+v", info)
	}

	// The trial ends: the feature goes quietly off and keeps its value.
	clock.Advance(config.BuiltinTrialPeriod + time.Minute)
	b.checkLicense()
	if b.EffectiveBool(coalescing) || !b.Properties().Bool(coalescing) {
		t.Fatalf("after the trial: effective %v, stored %v; want off, kept on", b.EffectiveBool(coalescing), b.Properties().Bool(coalescing))
	}
	if seen.String() != "false,true,false" {
		t.Fatalf("watcher saw %s", seen.String())
	}
	info := b.LicenseInfo()
	if info.Status.Status != config.LicenseStatusNone || !info.Violation || info.Loaded {
		t.Fatalf("after the trial: %+v", info)
	}
	// Enabling it now is refused naming the feature; turning it off is not.
	if err := setCoalescing(b, true); !errors.Is(err, kerr.PolicyViolation) || !errors.Is(err, config.ErrLicenseRequired) ||
		!strings.Contains(err.Error(), coalescing) || !strings.Contains(err.Error(), "no license") {
		t.Fatalf("enable without a license: %v", err)
	}
	if err := b.AlterClusterProperties([]PropertyChange{{Name: coalescing, Remove: true}}, false); err != nil {
		t.Fatalf("reset without a license: %v", err)
	}
	if err := setCoalescing(b, false); err != nil {
		t.Fatalf("disable without a license: %v", err)
	}
	if b.LicenseInfo().Violation {
		t.Fatal("violation with the feature off")
	}

	// Bad licenses are refused and change nothing.
	_, otherPriv := newLicenseKey(t)
	good := signLicense(t, priv, "Acme", clock.Now().Add(90*24*time.Hour))
	payload, sig, _ := strings.Cut(good, ".")
	tampered := strings.TrimRight(payload, "=") + "x." + sig
	for name, text := range map[string]string{
		"tampered":     tampered,
		"wrong signer": signLicense(t, otherPriv, "Acme", clock.Now().Add(90*24*time.Hour)),
		"expired":      signLicense(t, priv, "Acme", clock.Now().Add(-time.Hour)),
		"garbage":      "not a license",
	} {
		if _, err := b.SetLicense(text); !errors.Is(err, ErrInvalidLicense) {
			t.Errorf("%s license: %v, want ErrInvalidLicense", name, err)
		}
	}
	// Even past the broker's own check, the controller refuses a blob
	// that does not verify.
	if _, err := b.ctrl.propose(controller.SetLicense{Blob: []byte(tampered)}); err == nil {
		t.Error("controller stored a tampered license")
	}
	if b.LicenseInfo().Loaded {
		t.Fatal("a refused license was loaded")
	}

	// A valid license: the feature may be enabled again.
	if err := setCoalescing(b, true); err == nil {
		t.Fatal("enabled without a license")
	}
	if _, err := b.SetLicense(good + "\n"); err != nil {
		t.Fatalf("valid license: %v", err)
	}
	if err := setCoalescing(b, true); err != nil {
		t.Fatalf("enable with a license: %v", err)
	}
	info = b.LicenseInfo()
	if !info.Loaded || info.License.Org != "Acme" || info.Status.Status != config.LicenseStatusValid || info.Violation || info.SHA256 == "" {
		t.Fatalf("licensed: %+v", info)
	}
	if !b.EffectiveBool(coalescing) || seen.String() != "false,true,false,true" {
		t.Fatalf("licensed: effective %v, watcher saw %s", b.EffectiveBool(coalescing), seen.String())
	}

	// Within 30 days of the end, the status warns.
	clock.Advance(70 * 24 * time.Hour)
	if st := b.LicenseStatus(); !st.Valid || st.Warning == "" || st.DaysLeft != 19 {
		t.Fatalf("20 days before expiry: %+v", st)
	}

	// The license expires while the feature is on: off again, quietly.
	clock.Advance(21 * 24 * time.Hour)
	b.checkLicense()
	if b.EffectiveBool(coalescing) || !b.Properties().Bool(coalescing) || seen.String() != "false,true,false,true,false" {
		t.Fatalf("expired: effective %v stored %v watcher %s", b.EffectiveBool(coalescing), b.Properties().Bool(coalescing), seen.String())
	}
	if err := setCoalescing(b, true); !errors.Is(err, config.ErrLicenseRequired) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("enable after expiry: %v", err)
	}
	if info := b.LicenseInfo(); info.Status.Status != config.LicenseStatusExpired || !info.Violation || !info.Loaded {
		t.Fatalf("expired info %+v", info)
	}

	// A renewed license brings it back without a restart, and a restart
	// keeps the license and the property.
	if _, err := b.SetLicense(signLicense(t, priv, "Acme", clock.Now().Add(365*24*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if !b.EffectiveBool(coalescing) || seen.String() != "false,true,false,true,false,true" {
		t.Fatalf("renewed: effective %v watcher %s", b.EffectiveBool(coalescing), seen.String())
	}
	stop()
	b.Close()
	b = licenseBroker(t, dir, clock, pub)
	if info := b.LicenseInfo(); !info.Loaded || info.Status.Status != config.LicenseStatusValid || !b.EffectiveBool(coalescing) {
		t.Fatalf("after restart: %+v effective %v", info, b.EffectiveBool(coalescing))
	}
}

// TestLicenseNotTrustedByOtherKeys: a broker that does not trust the
// signer (a release build given a test license) keeps no license.
func TestLicenseNotTrustedByOtherKeys(t *testing.T) {
	clock := newFakeClock()
	pub, _ := newLicenseKey(t)
	_, testPriv := newLicenseKey(t)
	b := licenseBroker(t, t.TempDir(), clock, pub)
	if _, err := b.SetLicense(signLicense(t, testPriv, "Test", clock.Now().Add(time.Hour))); !errors.Is(err, config.ErrLicenseSignature) {
		t.Fatalf("%v, want a signature error", err)
	}
}
