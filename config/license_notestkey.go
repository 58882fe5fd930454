//go:build !weirtestlicense

package config

import "crypto/ed25519"

// testLicenseKeys: builds without the weirtestlicense tag (every release
// build) trust no test key.
func testLicenseKeys() []ed25519.PublicKey { return nil }
