package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is a refused command: a Kafka error code and a message for people.
// errors.Is(err, kerr.TopicAlreadyExists) and the like work on it.
type Error struct {
	Code    *kerr.Error
	Message string
}

func (e *Error) Error() string { return e.Code.Message + ": " + e.Message }

func (e *Error) Unwrap() error { return e.Code }

func errorf(code *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NodeIDConflictError refuses RegisterBroker: the node id is held by a live
// broker of another incarnation or RPC address. It wraps
// kerr.DuplicateBrokerRegistration.
type NodeIDConflictError struct {
	NodeID int32
	// The registration holding the id.
	Existing BrokerRegistration
	// The refused registration.
	Incarnation IncarnationID
	RPCAddr     string
	// How long before the existing registration expires, as of the
	// command's time.
	ExpiresIn      time.Duration
	SessionTimeout time.Duration
}

func (e *NodeIDConflictError) Error() string {
	why := "another process uses this node_id"
	if e.Existing.RPCAddr == e.RPCAddr {
		why = "this broker's data directory was replaced while its previous registration is live, or another process at the same address uses this node_id"
	}
	return fmt.Sprintf("%s: node id %d is registered by a live broker (rpc %s, kafka %s, incarnation %s, registered at epoch %d); %s: registration is possible once the old session expires in %v (broker session timeout %v), or give this broker another node_id",
		kerr.DuplicateBrokerRegistration.Message, e.NodeID, e.Existing.RPCAddr, e.Existing.KafkaAddr,
		e.Existing.Incarnation, e.Existing.Epoch, why, e.ExpiresIn, e.SessionTimeout)
}

func (e *NodeIDConflictError) Unwrap() error { return kerr.DuplicateBrokerRegistration }

// ErrorCode returns the Kafka error code of err: 0 for nil, the wrapped
// kerr.Error's code, or UNKNOWN_SERVER_ERROR (-1).
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// ErrStaleIndex is returned by Apply for an index at or below the applied
// one: the entry was applied already (or skipped by a snapshot).
var ErrStaleIndex = errors.New("controller: log index already applied")

func errStaleIndex(index, applied uint64) error {
	return fmt.Errorf("%w: %d <= %d", ErrStaleIndex, index, applied)
}

// ErrMalformed wraps every command decoding failure.
var ErrMalformed = errors.New("controller: malformed command")

// ErrUnsupportedVersion wraps decoding failures of a command type or
// version this code does not know (written by a newer weir).
var ErrUnsupportedVersion = errors.New("controller: unsupported command")

func decodeError(err error) error {
	if errors.Is(err, ErrUnsupportedVersion) {
		return &Error{Code: kerr.UnsupportedVersion, Message: err.Error()}
	}
	return &Error{Code: kerr.InvalidRequest, Message: err.Error()}
}
