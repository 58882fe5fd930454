// Package tlstest issues throwaway certificates for tests of weir's TLS:
// a certificate authority, server certificates for the loopback
// addresses, and client certificates whose subjects become mTLS
// principals (User:CN=...). Certificates come as PEM, as PEM files and as
// crypto/tls values, so a test can hand them to a broker's config and to
// its clients alike. It is imported by tests only.
package tlstest
