// Command weirctl is the administrative CLI for weir, a Kafka-compatible
// broker. It plays the role rpk plays for Redpanda: topic administration,
// ad-hoc producing and consuming, and quick throughput/latency benchmarks.
//
// Everything speaks the plain Kafka protocol through franz-go, so weirctl
// works against any Kafka-compatible cluster, not only weir. That is
// deliberate: when weirctl and another Kafka tool disagree about a weir
// broker, the broker is the suspect, not a private admin API.
//
// Command tree:
//
//	weirctl topic create NAME... [-p partitions] [-r replicas] [-c key=value]... [--dry-run]
//	weirctl topic list
//	weirctl topic describe NAME
//	weirctl topic delete NAME...
//	weirctl produce TOPIC [-k key] [-p partition] [--value V] [--compression C] [--acks A]
//	weirctl consume TOPIC [-g group] [-o start|end|OFFSET] [-n count] [--isolation L] [--buffer-memory SIZE]
//	weirctl bench produce TOPIC --records N [--record-size B] [--partitions P] ...
//	weirctl bench consume TOPIC --records N [--consumers C] ...
//	weirctl bench fanout TOPIC --mode preload|tail --consumers N [--coalescing on|off|both] ...
//	weirctl bench memory TOPIC [--consumers N] [--backlog-bytes B] [--stalled S] ...
//	weirctl cluster info
//	weirctl cluster health [--memory-sample D]  (exit 1 when unhealthy; memory waits are warnings)
//	weirctl cluster config get [NAME...] | set NAME=VALUE... | status | export [-f F] [--all] | import -f F
//	weirctl cluster license set KEY | set -f PATH|- | info
//	weirctl cluster coalescer stats  (every broker's fetch read coalescer counters)
//	                                (admin HTTP API: --admin-url or WEIR_ADMIN_URL, not the Kafka protocol)
//	weirctl group list [--state S,...]
//	weirctl group describe GROUP...
//	weirctl group delete GROUP...
//	weirctl group seek GROUP --to start|end|OFFSET|@TIMESTAMP_MS [--topics T,...] [--dry-run]
//	weirctl acl user create USER --password P|--password-file F [--mechanism M] [--iterations N]
//	weirctl acl user delete USER [--mechanism M]
//	weirctl acl user list [USER...]
//	weirctl completion bash|zsh|fish|powershell
//
// Global flags: --brokers (or WEIR_BROKERS), --format table|json|yaml, --timeout.
//
// This package holds the operator commands. The benchmarks are
// internal/bench, one package per larger benchmark; what both use (the
// global flags, clients and output formats, and the admin API client) is
// internal/cli and internal/admin.
//
// Output contract: with --format json or yaml, stdout carries only that
// format. One-shot commands print a single document (the YAML has the same
// keys and order as the JSON); produce and consume stream one object per
// line (JSON Lines), or one YAML document per record opened by "---", so
// that they can be piped while still running.
// Diagnostics and bench progress always go to stderr. Any failure, including
// a per-topic or per-record Kafka error, makes the exit status non-zero.
//
// Shell completion: `weirctl completion SHELL` prints a script for bash,
// zsh, fish or powershell (see `weirctl completion SHELL --help` for how to
// load it); it completes commands, flags and --format's values. Completion
// skips the global flag checks, so a bad WEIR_BROKERS cannot silently break it.
package main
