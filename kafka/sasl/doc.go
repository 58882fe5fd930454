// Package sasl is the server side of the SASL mechanisms a Kafka broker
// offers: PLAIN (RFC 4616) and SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
// RFC 7677), with the semantics Kafka gives them (KIP-43, KIP-84). It does
// no I/O: a Server is one client's conversation, which the SaslHandshake
// handler picks by mechanism name and the SaslAuthenticate handler feeds
// each request's auth_bytes through Step, answering with the bytes Step
// returns, until Step reports done (the client is then Username) or fails.
//
// Every error a conversation ends with wraps the Kafka error code to
// answer with (SASL_AUTHENTICATION_FAILED, or ILLEGAL_SASL_STATE for a step
// after the end), so the broker's usual kerr mapping applies. A failed
// SCRAM step may also return an RFC 5802 "e=" server-final message; Kafka
// brokers send only the error code, and so may weir.
//
// The package knows of users only what the caller tells it. PLAIN asks a
// PlainVerifier. SCRAM looks up a scram.Credential (broker/scram, the
// credential math the controller shares): the salt, iteration count,
// StoredKey and ServerKey that KIP-554's AlterUserScramCredentials stores,
// never the password.
//
// Kafka fails a SCRAM exchange for an unknown user at its first message,
// which tells anyone which users exist. Here the exchange runs to the end
// against a decoy credential derived from the user name (and a key, see
// WithDecoyKey), stable from one conversation to the next and shaped like
// a real one, and fails at the proof exactly as a wrong password does.
//
// Not here: GSSAPI (Kerberos), OAUTHBEARER (KIP-255), the -PLUS SCRAM
// variants with channel binding, delegation tokens (KIP-48: the SCRAM
// "tokenauth" extension is refused), SASLprep normalisation of names and
// passwords (Kafka does none either), and re-authentication (KIP-368),
// which is the broker's to schedule, each time with a new conversation.
package sasl
