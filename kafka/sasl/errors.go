package sasl

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors a conversation ends with. Each wraps the kerr code a Kafka broker
// answers SaslAuthenticate with, so errors.As finds the code and the rest
// of the text is the detail for the response's error message.
var (
	// ErrAuthenticationFailed: the client did not prove it is the user it
	// names. Unknown user and wrong password read the same, so that the
	// message a client is sent doesn't tell them apart.
	ErrAuthenticationFailed = fmt.Errorf("%w: sasl: authentication failed", kerr.SaslAuthenticationFailed)
	// ErrMalformed: a client message does not parse.
	ErrMalformed = fmt.Errorf("%w: sasl: malformed message", kerr.SaslAuthenticationFailed)
	// ErrUnsupported: the client asks for what weir does not do: channel
	// binding, delegation tokens, a mandatory SCRAM extension.
	ErrUnsupported = fmt.Errorf("%w: sasl: unsupported", kerr.SaslAuthenticationFailed)
	// ErrIllegalState: Step on a conversation that has finished or failed.
	ErrIllegalState = fmt.Errorf("%w: sasl: conversation is over", kerr.IllegalSaslState)
)

// A mechanism that is not SCRAM, and a lookup that hands back a credential
// unfit for the exchange, fail with scram.ErrUnknownMechanism and
// scram.ErrInvalidCredential.
