//go:build weirtestlicense

package config

import (
	"encoding/hex"
	"errors"
	"testing"
	"time"
)

func TestTestKeyTrustedWithTag(t *testing.T) {
	if got := hex.EncodeToString(TestLicensePrivateKey.Seed()); got != testLicenseSeedHexForTests {
		t.Fatalf("test key seed %s differs from the one the default-build test checks", got)
	}
	if n := len(TrustedLicenseKeys()); n != 2 {
		t.Fatalf("want vendor + test key, got %d", n)
	}
	exp := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	text := SignTestLicense(License{Org: "Test Org", Type: LicenseTypeEnterprise, Expiry: exp})
	l, err := ParseLicense(text, TrustedLicenseKeys())
	if err != nil {
		t.Fatal(err)
	}
	if l != (License{Version: 1, Org: "Test Org", Type: "enterprise", Expiry: exp}) {
		t.Fatalf("got %+v", l)
	}
	if err := ValidateLicenseBlob([]byte(text + "\n")); err != nil {
		t.Fatalf("ValidateLicenseBlob: %v", err)
	}
	// Still refused if tampered, even with the test key trusted.
	tampered := SignTestLicense(License{Org: "Test Org", Type: LicenseTypeTrial, Expiry: exp})
	payload, _, _ := cutDot(tampered)
	_, sig, _ := cutDot(text)
	if _, err := ParseLicense(payload+"."+sig, TrustedLicenseKeys()); !errors.Is(err, ErrLicenseSignature) {
		t.Fatalf("spliced license: %v", err)
	}
}

func TestSignTestLicensePanicsOnBadLicense(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	SignTestLicense(License{Org: "", Type: "enterprise", Expiry: time.Unix(100, 0)})
}

func cutDot(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
