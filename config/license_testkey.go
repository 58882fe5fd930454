//go:build weirtestlicense

package config

import (
	"crypto/ed25519"
	"encoding/hex"
)

// This file is compiled only with the weirtestlicense build tag, used by
// tests (go test -tags weirtestlicense). Release builds (Makefile build,
// Dockerfile) never set it, so they never trust this key: its private half
// is public, right here.

const testLicenseSeedHex = "2d5f186df9331d0907bc63e489cde6758c97e6336b93f6256dd1e076b46c8aed"

// TestLicensePrivateKey signs licenses that only weirtestlicense builds
// accept. It is derived from a fixed seed.
var TestLicensePrivateKey = ed25519.NewKeyFromSeed(mustSeed(testLicenseSeedHex))

func mustSeed(h string) []byte {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != ed25519.SeedSize {
		panic("config: bad test license seed")
	}
	return b
}

func testLicenseKeys() []ed25519.PublicKey {
	return []ed25519.PublicKey{TestLicensePrivateKey.Public().(ed25519.PublicKey)}
}

// SignTestLicense returns l in text form signed with TestLicensePrivateKey.
// A zero Version means LicenseFormatVersion. It panics on a license
// ParseLicense would refuse (a bug in the test).
func SignTestLicense(l License) string {
	if l.Version == 0 {
		l.Version = LicenseFormatVersion
	}
	s, err := SignLicense(TestLicensePrivateKey, l)
	if err != nil {
		panic("config.SignTestLicense: " + err.Error())
	}
	return s
}
