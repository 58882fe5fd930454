package config

import (
	"crypto/ed25519"
	"encoding/hex"
)

// vendorLicensePublicKeyHex is the public half of the weir vendor's license
// signing key. The private half is not in this repository.
const vendorLicensePublicKeyHex = "1588cd867cca3232e7e2e3a45ba2e61acd4cfa5d423f9200a374d2fcba44fb66"

var vendorLicensePublicKey = mustPublicKey(vendorLicensePublicKeyHex)

func mustPublicKey(h string) ed25519.PublicKey {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != ed25519.PublicKeySize {
		panic("config: bad compiled-in license public key")
	}
	return ed25519.PublicKey(b)
}

// TrustedLicenseKeys returns the public keys licenses must be signed with:
// the vendor's key, plus the test key in builds tagged weirtestlicense
// (release builds never use that tag, so never trust the test key).
func TrustedLicenseKeys() []ed25519.PublicKey {
	return append([]ed25519.PublicKey{vendorLicensePublicKey}, testLicenseKeys()...)
}
