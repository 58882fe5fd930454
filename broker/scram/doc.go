// Package scram is the SCRAM credential math (RFC 5802, RFC 7677,
// KIP-554) that the SASL listener and the controller share: the
// mechanisms and their hashes, the iteration bounds, deriving a credential
// from a password or from a salted password, and the one check of what a
// stored credential must be. It holds no state and imports nothing of weir
// but the mechanism names in config.
package scram
