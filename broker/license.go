package broker

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
)

// licenseCheckEvery is how often the broker looks at the clock for a
// license or trial that ended (or a feature that comes back): enterprise
// properties' watchers fire within this of the change.
const licenseCheckEvery = time.Second

// licenseReminderEvery is how often the broker repeats its warning while
// enterprise features are in use without a valid license, or while the
// license in effect ends within 30 days.
const licenseReminderEvery = time.Hour

// verifiedLicense is the controller's license blob as this broker verified
// it, once per license version.
type verifiedLicense struct {
	version int64
	license *config.License // nil when none is stored or it failed to verify
	sha256  string          // of the stored text, "" when none
	err     error           // why a stored blob did not verify
}

// Enterprise is the licence and what it decides: the cluster licence as
// this broker verified it, the value each property takes effect with
// (an enterprise property's only while a licence or the trial allows),
// and the watchers that follow those values (watch.go). The Broker
// composes it; what it needs of the rest of the broker it is handed.
type Enterprise struct {
	props      *config.Values
	view       func() *controller.View
	propose    func(controller.Command) (controller.Result, error)
	logger     *slog.Logger
	now        func() time.Time
	keys       []ed25519.PublicKey
	registerer prometheus.Registerer
	license    licenseState
	watchers   watchers
}

func newEnterprise(props *config.Values, view func() *controller.View, propose func(controller.Command) (controller.Result, error),
	logger *slog.Logger, now func() time.Time, keys []ed25519.PublicKey, registerer prometheus.Registerer) Enterprise {
	return Enterprise{props: props, view: view, propose: propose, logger: logger, now: now, keys: keys, registerer: registerer}
}

// licenseState is the broker's side of the cluster license.
type licenseState struct {
	verified atomic.Pointer[verifiedLicense]

	mu           sync.Mutex
	lastValid    *bool     // enterprise features took effect at the last check
	lastReminder time.Time // of the periodic warning
}

// applyLicense verifies the view's license when its version changed: every
// broker checks the signature itself rather than trusting the controller.
func (e *Enterprise) applyLicense(v *controller.View) {
	stored := v.License()
	if cur := e.license.verified.Load(); cur != nil && cur.version == stored.Version {
		return
	}
	vl := &verifiedLicense{version: stored.Version}
	if len(stored.Blob) > 0 {
		sum := sha256.Sum256([]byte(strings.TrimSpace(string(stored.Blob))))
		vl.sha256 = hex.EncodeToString(sum[:])
		l, err := config.ParseLicense(string(stored.Blob), e.keys)
		if err != nil {
			vl.err = err
			e.logger.Error("the cluster's license does not verify on this broker; enterprise features will not take effect", "err", err)
		} else {
			vl.license = &l
			e.logger.Info("license applied", "org", l.Org, "type", l.Type, "expiry", l.Expiry.Format(time.RFC3339))
		}
	}
	e.license.verified.Store(vl)
}

// validateLicenseBlob is the controller's check of a license blob:
// signature and schema against this broker's trusted keys, never the
// clock (Apply must be deterministic).
func (e *Enterprise) validateLicenseBlob(blob []byte) error {
	_, err := config.ParseLicense(string(blob), e.keys)
	return err
}

// LicenseStatus judges the cluster's license at the broker's clock: a
// verified, unexpired license, else the built-in trial from the cluster's
// creation, else none or expired.
func (e *Enterprise) LicenseStatus() config.LicenseStatus {
	return config.EvaluateLicense(e.loadedLicense(), e.view().Created(), e.now())
}

func (e *Enterprise) loadedLicense() *config.License {
	if vl := e.license.verified.Load(); vl != nil {
		return vl.license
	}
	return nil
}

// enterpriseValid reports whether enterprise features take effect now;
// it is LicenseStatus().Valid without building the status.
func (e *Enterprise) enterpriseValid() bool {
	now := e.now()
	if l := e.loadedLicense(); l != nil && now.Before(l.Expiry) {
		return true
	}
	created := e.view().Created()
	return !created.IsZero() && now.Before(created.Add(config.BuiltinTrialPeriod))
}

// LicenseInfo is the license as GET /v1/features/license shows it.
type LicenseInfo struct {
	// Loaded reports whether a license is stored and verifies here.
	Loaded  bool
	License *config.License
	SHA256  string
	// Invalid is why a stored license does not verify on this broker.
	Invalid string
	Status  config.LicenseStatus
	// InUse lists the enterprise features set to something other than
	// their defaults.
	InUse     []string
	Violation bool
}

// LicenseInfo reports the license, its status and the enterprise features
// in use.
func (e *Enterprise) LicenseInfo() LicenseInfo {
	info := LicenseInfo{Status: e.LicenseStatus(), InUse: e.props.EnterpriseInUse()}
	if vl := e.license.verified.Load(); vl != nil {
		info.License, info.Loaded, info.SHA256 = vl.license, vl.license != nil, vl.sha256
		if vl.err != nil {
			info.Invalid = vl.err.Error()
		}
	}
	info.Violation = info.Status.Violation(info.InUse)
	return info
}

// ErrInvalidLicense wraps every refusal of SetLicense for the license
// itself (malformed, not signed by a trusted key, expired).
var ErrInvalidLicense = errors.New("invalid license")

// SetLicense verifies a license here (signature, schema, not expired),
// then stores it through the controller, where every broker verifies it
// again as it applies it. It returns once this broker has applied it.
func (e *Enterprise) SetLicense(text string) (config.License, error) {
	l, err := config.ParseLicense(text, e.keys)
	if err != nil {
		return config.License{}, fmt.Errorf("%w: %w", ErrInvalidLicense, err)
	}
	if now := e.now(); !now.Before(l.Expiry) {
		return config.License{}, fmt.Errorf("%w: the license of %s expired at %s", ErrInvalidLicense, l.Org, l.Expiry.Format(time.RFC3339))
	}
	if _, err := e.propose(controller.SetLicense{Blob: []byte(strings.TrimSpace(text))}); err != nil {
		return config.License{}, err
	}
	return l, nil
}

// CheckEnterprise refuses turning an enterprise feature on without a
// valid license, naming the feature and why: the error wraps
// kerr.PolicyViolation (its Kafka code) and a *config.LicenseRequiredError.
// Turning features off, and every other property, is allowed.
func (e *Enterprise) CheckEnterprise(name, value string) error {
	err := config.CheckEnterprise(e.props.Registry(), name, value, e.LicenseStatus())
	if err != nil {
		return fmt.Errorf("%w: %w", kerr.PolicyViolation, err)
	}
	return nil
}

// Effective returns the value a cluster property takes effect with: its
// set value, except that an enterprise property behaves as its default
// while there is no valid license (its set value is kept).
func (e *Enterprise) Effective(name string) string {
	value, _ := e.props.Get(name)
	if p, ok := e.props.Registry().Lookup(name); ok && p.Enterprise && !e.enterpriseValid() {
		return p.Default
	}
	return value
}

// EffectiveBool is Effective for a boolean property.
func (e *Enterprise) EffectiveBool(name string) bool {
	return parseBool(e.Effective(name))
}

func parseBool(s string) bool {
	switch strings.ToLower(s) {
	case "1", "t", "true":
		return true
	}
	return false
}

// checkLicense runs every licenseCheckEvery: it fires the watchers of
// properties whose effective value changed because a license or the trial
// ended or came back, and logs a warning when enterprise features stop
// taking effect, and then every licenseReminderEvery while they are in
// use without a valid license or the license ends within 30 days.
func (e *Enterprise) checkLicense() {
	st := e.LicenseStatus()
	inUse := e.props.EnterpriseInUse()
	now := e.now()

	e.license.mu.Lock()
	changed := e.license.lastValid == nil || *e.license.lastValid != st.Valid
	valid := st.Valid
	e.license.lastValid = &valid
	remind := len(inUse) > 0 && (!st.Valid || st.Warning != "") &&
		(changed || now.Sub(e.license.lastReminder) >= licenseReminderEvery || now.Before(e.license.lastReminder))
	if remind {
		e.license.lastReminder = now
	}
	e.license.mu.Unlock()

	e.fireWatchers()
	if !remind {
		return
	}
	if !st.Valid {
		e.logger.Warn("enterprise features are in use without a valid license; they behave as their defaults until a valid license is set with 'weirctl cluster license set'",
			"features", strings.Join(inUse, ","), "license", st.Describe())
		return
	}
	e.logger.Warn(st.Warning, "features", strings.Join(inUse, ","))
}

// registerLicenseMetrics exports the license's state.
func (e *Enterprise) registerLicenseMetrics() {
	if e.registerer == nil {
		return
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "weir_license_expiry_seconds",
			Help: "Seconds until the license in effect (or the built-in trial) ends; 0 when none is in effect.",
		}, func() float64 {
			st := e.LicenseStatus()
			if !st.Valid {
				return 0
			}
			return st.Expiry.Sub(e.now()).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "weir_license_valid",
			Help: "1 while enterprise features take effect (a valid license or the built-in trial), else 0.",
		}, func() float64 { return boolGauge(e.enterpriseValid()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "weir_enterprise_license_violation",
			Help: "1 while enterprise features are set but no valid license lets them take effect.",
		}, func() float64 { return boolGauge(e.LicenseInfo().Violation) }),
	} {
		if err := e.registerer.Register(c); err != nil {
			e.logger.Warn("registering license metrics", "err", err)
		}
	}
}

func boolGauge(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
