package sasl

import "github.com/weir-broker/weir/config"

// Mechanisms lists the mechanisms this package implements, for a
// SaslHandshake response to offer.
func Mechanisms() []string {
	return []string{config.MechanismPlain, config.MechanismSCRAMSHA256, config.MechanismSCRAMSHA512}
}

// Server is one client's authentication conversation. It is not safe for
// concurrent use: a connection steps it from its request handler.
type Server interface {
	// Mechanism is the conversation's mechanism name.
	Mechanism() string
	// Step takes a client message and returns the server's answer. done
	// is true when the client has authenticated; an error ends the
	// conversation (serverMessage may then hold an RFC 5802 "e="
	// message), and any Step after the end fails with ErrIllegalState.
	Step(clientMessage []byte) (serverMessage []byte, done bool, err error)
	// Username is the authenticated user, empty until Step is done.
	Username() string
}

// state is where a conversation is.
type state uint8

const (
	stateFirst  state = iota // awaiting the client's first message
	stateFinal               // SCRAM: awaiting client-final-message
	stateDone                // authenticated
	stateFailed              // failed; no more steps
)
