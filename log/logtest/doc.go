// Package logtest builds Kafka record batches for tests of packages that
// sit on top of the log, the way producers build them. It is imported by
// tests only.
package logtest
