package kafka

// Authorization of requests, as Kafka's request handlers do it: each
// handler asks about the topics, groups and cluster its request names, one
// question per resource (never per partition), and answers what is refused
// with the resource's *_AUTHORIZATION_FAILED code where Kafka does. The
// broker's authorizer decides (ACLs, superusers); docs/security.md lists
// what each API needs.

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterResourceName is the one name the CLUSTER resource has in ACLs.
const clusterResourceName = "kafka-cluster"

// operationsNotRequested is the authorized-operations value of a response
// whose request did not ask for them (KIP-430's schema default).
const operationsNotRequested = math.MinInt32

// requestAuthorizer answers one request's authorization questions.
// Whether authorization is on is read once per request, and the principal
// and host only when it is, so with it off every check is a bool test and
// the produce and fetch paths allocate nothing for it.
type requestAuthorizer struct {
	security  security
	logger    *slog.Logger
	enabled   bool
	principal string
	host      string
}

// authorizer returns the checks for the request being handled.
func (c *clientConn) authorizer() requestAuthorizer {
	a := requestAuthorizer{security: c.s.security, logger: c.logger, enabled: c.s.security.AuthorizationEnabled()}
	if a.enabled {
		a.principal, a.host = c.principal(), c.remoteHost()
	}
	return a
}

// allowed reports whether the request may perform op on the resource,
// and logs a denial.
func (a *requestAuthorizer) allowed(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if !a.enabled {
		return true
	}
	if a.security.Authorize(a.principal, a.host, op, rt, name) {
		return true
	}
	// Kafka's authorizer logs denials too: the client usually only
	// says which resource, not who it was or what was asked.
	if a.logger.Enabled(context.Background(), slog.LevelDebug) {
		a.logger.Debug("request not authorized", "principal", a.principal, "host", a.host,
			"operation", op.String(), "resource_type", rt.String(), "resource", name)
	}
	return false
}

// allowedQuietly is allowed without the log, for a check whose denial
// refuses nothing: it falls back to another check, or leaves a resource
// out of a listing (Kafka's logIfDenied=false).
func (a *requestAuthorizer) allowedQuietly(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return !a.enabled || a.security.Authorize(a.principal, a.host, op, rt, name)
}

func (a *requestAuthorizer) topic(op kmsg.ACLOperation, name string) bool {
	return a.allowed(op, kmsg.ACLResourceTypeTopic, name)
}

func (a *requestAuthorizer) group(op kmsg.ACLOperation, name string) bool {
	return a.allowed(op, kmsg.ACLResourceTypeGroup, name)
}

func (a *requestAuthorizer) transactionalID(op kmsg.ACLOperation, id string) bool {
	return a.allowed(op, kmsg.ACLResourceTypeTransactionalId, id)
}

func (a *requestAuthorizer) cluster(op kmsg.ACLOperation) bool {
	return a.allowed(op, kmsg.ACLResourceTypeCluster, clusterResourceName)
}

// someTopic reports whether op is allowed on at least one topic, existing
// or not, by Kafka's authorizeByResourceType rule; quiet, since callers
// fall back to another check.
func (a *requestAuthorizer) someTopic(op kmsg.ACLOperation) bool {
	return !a.enabled || a.security.AuthorizeByResourceType(a.principal, a.host, op, kmsg.ACLResourceTypeTopic)
}

func (a *requestAuthorizer) topicQuietly(op kmsg.ACLOperation, name string) bool {
	return a.allowedQuietly(op, kmsg.ACLResourceTypeTopic, name)
}

func (a *requestAuthorizer) groupQuietly(op kmsg.ACLOperation, name string) bool {
	return a.allowedQuietly(op, kmsg.ACLResourceTypeGroup, name)
}

func (a *requestAuthorizer) clusterQuietly(op kmsg.ACLOperation) bool {
	return a.allowedQuietly(op, kmsg.ACLResourceTypeCluster, clusterResourceName)
}

// operations is the KIP-430 authorized-operations bit set of a resource:
// bit n is set when the operation with code n is allowed, over the
// operations Kafka supports for the resource's type. With authorization
// off every supported operation is allowed, as Kafka answers without an
// authorizer.
func (a *requestAuthorizer) operations(rt kmsg.ACLResourceType, name string) int32 {
	supported := supportedOperations(rt)
	if !a.enabled {
		return supported
	}
	var set int32
	for op := kmsg.ACLOperationRead; op <= kmsg.ACLOperationDescribeTokens; op++ {
		bit := int32(1) << op
		if supported&bit != 0 && a.allowedQuietly(op, rt, name) {
			set |= bit
		}
	}
	return set
}

// supportedOperations is the bit set of the operations ACLs may grant on
// a resource type (Kafka 4's AclEntry.supportedOperations).
func supportedOperations(rt kmsg.ACLResourceType) int32 {
	bits := func(ops ...kmsg.ACLOperation) int32 {
		var set int32
		for _, op := range ops {
			set |= 1 << op
		}
		return set
	}
	switch rt {
	case kmsg.ACLResourceTypeTopic:
		return bits(kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
			kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs)
	case kmsg.ACLResourceTypeGroup:
		return bits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
			kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs)
	case kmsg.ACLResourceTypeCluster:
		return bits(kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
			kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe)
	case kmsg.ACLResourceTypeTransactionalId:
		return bits(kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite)
	case kmsg.ACLResourceTypeDelegationToken:
		return bits(kmsg.ACLOperationDescribe)
	case kmsg.ACLResourceTypeUser:
		return bits(kmsg.ACLOperationCreateTokens, kmsg.ACLOperationDescribeTokens)
	}
	return 0
}

// partitionAllowed splits a request's resources into those allowed, in
// order, and a flag per resource, so that a handler can pass the allowed
// ones on and answer the others in the request's order.
func partitionAllowed[T any](items []T, allowed func(*T) bool) (permitted []T, ok []bool) {
	ok = make([]bool, len(items))
	for i := range items {
		if ok[i] = allowed(&items[i]); ok[i] {
			permitted = append(permitted, items[i])
		}
	}
	return permitted, ok
}

// mayCreateTopic reports whether the request may create the topic: CREATE
// on the cluster or on the topic itself.
func (a *requestAuthorizer) mayCreateTopic(name string) bool {
	return a.clusterQuietly(kmsg.ACLOperationCreate) || a.topic(kmsg.ACLOperationCreate, name)
}

// authorizeConfigResource checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on
// a config resource: a topic's own, the cluster's for BROKER resources.
// Other types are left to the handler, which refuses them.
func authorizeConfigResource(auth *requestAuthorizer, op kmsg.ACLOperation, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !auth.topic(op, name) {
			return fmt.Errorf("%w: %s on topic %s", kerr.TopicAuthorizationFailed, op, name)
		}
	case kmsg.ConfigResourceTypeBroker:
		if !auth.cluster(op) {
			return fmt.Errorf("%w: %s on the cluster", kerr.ClusterAuthorizationFailed, op)
		}
	}
	return nil
}
