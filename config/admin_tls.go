package config

import (
	"errors"
	"fmt"
	"strings"
)

// adminTLSKey is the node config key of the admin listener's TLS, with
// the same keys as a Kafka listener's tls (cert_file, key_file, ca_file,
// client_auth, min_version), so one set of certificates and habits
// serves both.
const adminTLSKey = "admin_tls"

// ParseAdminTLS reads the admin_tls key as koanf hands it over (a map
// from YAML, or the map that --set admin_tls.cert_file=... and
// WEIR_ADMIN_TLS__CERT_FILE build); nil, the default, serves the admin
// API over plain HTTP. Like ParseListeners it refuses unknown keys, and
// it reports every problem at once; ValidateAdminTLS checks the values.
func ParseAdminTLS(v any) (*ListenerTLS, error) {
	if v == nil {
		return nil, nil
	}
	var errs []error
	fail := func(field string, err error) {
		errs = append(errs, adminTLSError(field, err))
	}
	t := parseListenerTLS(v, fail)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// ValidateAdminTLS checks the settings and reads the files, so that a
// broker with a missing or broken admin certificate refuses to start
// instead of failing its first handshake. nil (no TLS) is valid.
func ValidateAdminTLS(t *ListenerTLS) error {
	if t == nil {
		return nil
	}
	var errs []error
	validateListenerTLS(*t, func(field string, err error) {
		errs = append(errs, adminTLSError(field, err))
	})
	return errors.Join(errs...)
}

// adminTLSError names the setting as the node config spells it:
// "tls.cert_file" of a listener is "admin_tls.cert_file" here.
func adminTLSError(field string, err error) error {
	return fmt.Errorf("%s%s: %w", adminTLSKey, strings.TrimPrefix(field, "tls"), err)
}
