// Package config owns weir's two kinds of configuration.
//
// Node config is per process: where this broker listens, where it keeps its
// data, who it is. It is loaded once at start with koanf from, in rising
// precedence, built-in defaults, a YAML file, WEIR_ environment variables and
// command-line flags.
//
// Cluster properties are cluster-wide settings with a typed registry (name,
// type, default, validation, description, enterprise flag, restart flag).
// Values holds the current value of every property; a node config's
// `cluster:` section seeds it when a cluster is first created.
package config
