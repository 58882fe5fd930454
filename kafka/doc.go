// Package kafka is weir's Kafka wire protocol: the TCP listener, framing
// with a maximum request size, request headers, and one file per API that
// turns a kmsg request into calls on the broker and a kmsg response.
//
// Handlers reach the broker through the small interfaces of domain.go, one
// per family (cluster view, topic catalog, topic admin, records, groups,
// cluster properties, security, client quotas), declared here where they
// are used:
// *broker.Broker implements them all, and a handler's test can run it
// against fakes of the families it uses.
//
// Each API file opens with the versions it serves and how it behaves; the
// table in apis.go is the single list of supported APIs and version
// ranges, and ApiVersions is built from it.
//
// Requests on one connection are answered in order, one at a time, as
// Kafka does: a reader goroutine reads ahead a few frames while a handler
// goroutine answers them.
//
// Client quotas are enforced here, per broker (quota.go, quota_conn.go):
// a request over its connection's quota is answered at once with
// throttle_time_ms, and the connection handles nothing more until that
// time has passed.
package kafka
