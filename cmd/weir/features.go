package main

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/config"
)

// maxLicenseBody bounds a PUT /v1/features/license body; a license is far
// smaller (config.MaxLicenseTextSize), which ParseLicense reports.
const maxLicenseBody = 64 << 10

// licenseBackend is what the license endpoints need of the broker; tests
// substitute a fake.
type licenseBackend interface {
	Properties() *config.Values
	LicenseInfo() broker.LicenseInfo
	SetLicense(text string) (config.License, error)
}

// registerFeatures adds the license endpoints:
//
//	GET /v1/features/license     the license, its status, features in use
//	PUT /v1/features/license     body: the license text → as GET
//	GET /v1/features/enterprise  license status, violation, every enterprise feature
func registerFeatures(mux *http.ServeMux, b licenseBackend) {
	mux.HandleFunc("/v1/features/license", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			writeJSON(w, http.StatusOK, licenseDocument(b.LicenseInfo()))
		case http.MethodPut:
			putLicense(w, r, b)
		default:
			methodNotAllowed(w, "GET, PUT")
		}
	})
	mux.HandleFunc("/v1/features/enterprise", getOnly(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, enterpriseDocument(b))
	}))
}

// licenseJSON is the loaded license in GET /v1/features/license.
type licenseJSON struct {
	FormatVersion int    `json:"format_version"`
	Org           string `json:"org"`
	Type          string `json:"type"`
	Expires       int64  `json:"expires"`
	SHA256        string `json:"sha256"`
}

// licenseStatusJSON is GET /v1/features/license.
type licenseStatusJSON struct {
	Loaded  bool         `json:"loaded"`
	License *licenseJSON `json:"license,omitempty"`
	// Invalid says why a stored license does not verify on this broker.
	Invalid      string   `json:"invalid,omitempty"`
	Status       string   `json:"status"`
	Valid        bool     `json:"valid"`
	BuiltinTrial bool     `json:"builtin_trial"`
	Expires      int64    `json:"expires"`
	ExpiresAt    string   `json:"expires_at,omitempty"`
	DaysLeft     int      `json:"days_left"`
	Warning      string   `json:"warning,omitempty"`
	Violation    bool     `json:"violation"`
	InUse        []string `json:"features_in_use"`
}

func licenseDocument(info broker.LicenseInfo) licenseStatusJSON {
	st := info.Status
	doc := licenseStatusJSON{Loaded: info.Loaded, Invalid: info.Invalid, Status: st.Status, Valid: st.Valid,
		BuiltinTrial: st.BuiltinTrial, DaysLeft: st.DaysLeft, Warning: st.Warning, Violation: info.Violation,
		InUse: info.InUse}
	if doc.InUse == nil {
		doc.InUse = []string{}
	}
	if !st.Expiry.IsZero() {
		doc.Expires, doc.ExpiresAt = st.Expiry.Unix(), st.Expiry.UTC().Format(time.RFC3339)
	}
	if l := info.License; l != nil {
		doc.License = &licenseJSON{FormatVersion: l.Version, Org: l.Org, Type: l.Type, Expires: l.Expiry.Unix(), SHA256: info.SHA256}
	}
	return doc
}

func putLicense(w http.ResponseWriter, r *http.Request, b licenseBackend) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLicenseBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "license larger than %d bytes", maxLicenseBody)
			return
		}
		writeError(w, http.StatusBadRequest, "reading body: %v", err)
		return
	}
	text := strings.TrimSpace(string(body))
	if text == "" {
		writeError(w, http.StatusBadRequest, "empty body: send the license text")
		return
	}
	if _, err := b.SetLicense(text); err != nil {
		if errors.Is(err, broker.ErrInvalidLicense) {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
		writeError(w, http.StatusServiceUnavailable, "storing the license: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, licenseDocument(b.LicenseInfo()))
}

// enterpriseFeature is one enterprise property in GET /v1/features/enterprise.
type enterpriseFeature struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
}

type enterpriseJSON struct {
	LicenseStatus string              `json:"license_status"`
	Violation     bool                `json:"violation"`
	Features      []enterpriseFeature `json:"features"`
}

func enterpriseDocument(b licenseBackend) enterpriseJSON {
	info := b.LicenseInfo()
	doc := enterpriseJSON{LicenseStatus: info.Status.Status, Violation: info.Violation, Features: []enterpriseFeature{}}
	reg := b.Properties().Registry()
	for _, name := range reg.Names() {
		if p, _ := reg.Lookup(name); p.Enterprise {
			doc.Features = append(doc.Features, enterpriseFeature{Name: name, Enabled: slices.Contains(info.InUse, name)})
		}
	}
	return doc
}
