// Command weir is the broker daemon.
//
//	weir [--config weir.yaml] [--node-id N] [--data-dir DIR]
//	     [--kafka-addr HOST:PORT] [--admin-addr HOST:PORT] [--set key=value ...]
//
// It serves the Kafka protocol on kafka_addr and an admin HTTP API
// (/metrics, /v1/status/ready, /v1/cluster_config[/schema|/status]) on admin_addr, and shuts down cleanly on
// SIGTERM or SIGINT.
package main
