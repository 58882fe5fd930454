// Package acl decides whether a principal may perform an operation on a
// resource, from the cluster's ACL bindings and superusers, by the rules
// of Kafka's StandardAuthorizer:
//
//   - A superuser may do everything.
//   - A binding applies to a request when its resource pattern matches
//     the resource (a LITERAL name equal to it, the LITERAL wildcard "*",
//     or a PREFIXED name the resource's name starts with), its principal
//     is the request's or the wildcard of the same type ("User:*"), its
//     host is the client's address or "*", and its operation is the
//     requested one or ALL.
//   - An ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and
//     an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS. A DENY
//     implies nothing: denying READ does not deny DESCRIBE.
//   - Any applying DENY wins over every ALLOW; without an applying ALLOW
//     the request is denied (allow.everyone.if.no.acl.found=false).
//
// An Authorizer is immutable, built once from a snapshot of the bindings,
// and indexed so that Authorize, which runs for every topic of every
// produce and fetch, does a few map lookups and allocates nothing.
package acl
