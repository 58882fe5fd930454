package broker

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AuthorizationEnabled reports whether Kafka requests are checked against
// the ACLs (kafka_enable_authorization).
func (b *Broker) AuthorizationEnabled() bool {
	return b.props.Bool("kafka_enable_authorization")
}

// Superuser reports whether principal ("User:alice") is named by the
// superusers property, as "User:alice" or as "alice".
func (b *Broker) Superuser(principal string) bool {
	for _, su := range strings.Split(b.props.String("superusers"), ",") {
		su = strings.TrimSpace(su)
		if su == "" {
			continue
		}
		if !strings.Contains(su, ":") {
			su = "User:" + su
		}
		if su == principal {
			return true
		}
	}
	return false
}

// Authorize reports whether principal, connecting from host, may perform
// op on the resource of type rt called name. Everything is allowed while
// authorization is off, and to superusers.
func (b *Broker) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if !b.AuthorizationEnabled() || b.Superuser(principal) {
		return true
	}
	return false
}
