package sasl

import "github.com/weir-broker/weir/broker/scram"

// Shape of a decoy credential: 24 bytes of salt, as franz-go's kadm makes
// salts, and Kafka's default and minimum iteration count.
const (
	decoySaltLen    = 24
	decoyIterations = scram.MinIterations
)

// ScramOption configures a ScramServer.
type ScramOption func(*ScramServer)

// WithDecoyKey keys the decoy credential an unknown user is answered with.
// Without a key the decoy is derived from the mechanism and user name
// alone: stable and well formed, but anyone who reads this code can derive
// it too and so tell a decoy salt from a real one. With a secret key that
// the cluster's brokers share and keep across restarts, nobody can; a key
// per broker process still hides it from a client that does not compare
// brokers or restarts.
func WithDecoyKey(key []byte) ScramOption {
	key = append([]byte(nil), key...)
	return func(s *ScramServer) { s.decoyKey = key }
}

// decoy is the made-up credential for user: the same from one conversation
// to the next, as a real user's is, and with keys nobody can match, so the
// exchange fails at the proof.
func (s *ScramServer) decoy(user string) scram.Credential {
	derive := func(label string, n int) []byte {
		sum := scram.HMAC(s.hash, s.decoyKey, []byte(label), []byte{0}, []byte(s.mechanism), []byte{0}, []byte(user))
		return sum[:n]
	}
	size := s.hash().Size()
	return scram.Credential{
		Mechanism:  s.mechanism,
		Salt:       derive("weir SCRAM decoy salt", decoySaltLen),
		Iterations: decoyIterations,
		StoredKey:  derive("weir SCRAM decoy StoredKey", size),
		ServerKey:  derive("weir SCRAM decoy ServerKey", size),
	}
}
