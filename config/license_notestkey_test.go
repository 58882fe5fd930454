//go:build !weirtestlicense

package config

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"
)

// In a default build (every release build), a license signed with the test
// key is refused.
func TestTestKeyNotTrustedByDefault(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(testLicenseSeed(t))
	pub := priv.Public().(ed25519.PublicKey)
	for _, k := range TrustedLicenseKeys() {
		if k.Equal(pub) {
			t.Fatal("the test license key is trusted without the weirtestlicense tag")
		}
	}
	text, err := SignLicense(priv, License{Version: 1, Org: "Test", Type: "enterprise", Expiry: time.Now().Add(24 * time.Hour).Truncate(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseLicense(text, TrustedLicenseKeys()); !errors.Is(err, ErrLicenseSignature) {
		t.Fatalf("test-signed license: err = %v, want ErrLicenseSignature", err)
	}
	if err := ValidateLicenseBlob([]byte(text)); !errors.Is(err, ErrLicenseSignature) {
		t.Fatalf("ValidateLicenseBlob: err = %v, want ErrLicenseSignature", err)
	}
	if len(TrustedLicenseKeys()) != 1 {
		t.Fatalf("want only the vendor key, got %d keys", len(TrustedLicenseKeys()))
	}
}
