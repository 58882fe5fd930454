// Package soak is weirctl bench soak: thousands of churning raw
// connections and steady produce and consumer group traffic for a long
// run, every record verified, and a verdict on whether the brokers'
// memory, goroutines and connections grew.
package soak
