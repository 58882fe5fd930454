package kafka

import "net"

// anonymousPrincipal is Kafka's principal for a connection that did not
// authenticate (PLAINTEXT, or SSL without a client certificate).
const anonymousPrincipal = "User:ANONYMOUS"

// principal is who the connection acts as, in Kafka's "User:name" form:
// the SASL user once authenticated, else the subject of a verified TLS
// client certificate, else User:ANONYMOUS. ACLs and superusers name it.
func (c *clientConn) principal() string {
	switch {
	case c.sasl.authenticated:
		return "User:" + c.sasl.user
	case c.tlsPrincipal != "":
		return c.tlsPrincipal
	}
	return anonymousPrincipal
}

// remoteHost is the client's IP address as ACL host patterns match it.
func (c *clientConn) remoteHost() string {
	if host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String()); err == nil {
		return host
	}
	return c.nc.RemoteAddr().String()
}
