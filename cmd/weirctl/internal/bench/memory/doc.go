// Package memory is weirctl bench memory: many consumers fetching a large
// backlog at once with raw Fetch requests, whose answers are walked batch
// by batch so that the bench itself stays small, while the brokers'
// resident memory and memory budgets are sampled from /metrics.
package memory
