// Package benchtest runs a benchmark's command in-process for its tests,
// under bench and with the global flags, without the rest of weirctl.
package benchtest
