package broker

import (
	"crypto/subtle"
	"fmt"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/broker/scram"
	"github.com/weir-broker/weir/config"
)

// ScramCredentials lists the cluster's SCRAM credentials, sorted by user
// and mechanism.
func (s *Security) ScramCredentials() []controller.ScramCredential {
	return s.view().ScramCredentials()
}

// ScramCredential returns user's credential for mechanism, as the SASL
// SCRAM exchange needs it.
func (s *Security) ScramCredential(user, mechanism string) (controller.ScramCredential, bool) {
	return s.view().ScramCredential(user, mechanism)
}

// AlterScramCredentials deletes and upserts credentials through the
// controller, all or nothing; it returns once this broker has applied
// the change.
func (s *Security) AlterScramCredentials(deletions []controller.ScramCredentialKey, upsertions []controller.ScramCredential) error {
	_, err := s.propose(controller.AlterScramCredentials{Deletions: deletions, Upsertions: upsertions})
	return err
}

// ScramCredentialFromSaltedPassword derives what the cluster stores from
// what a client sends in AlterUserScramCredentials (KIP-554): the salted
// password goes no further than this function.
func ScramCredentialFromSaltedPassword(user, mechanism string, iterations int32, salt, saltedPassword []byte) (controller.ScramCredential, error) {
	c, err := scram.FromSaltedPassword(mechanism, saltedPassword, salt, iterations)
	if err != nil {
		return controller.ScramCredential{}, fmt.Errorf("%w: %v", scram.Code(err), err)
	}
	cred := controller.ScramCredential{User: user, Credential: c}
	return cred, controller.ValidateScramCredential(cred)
}

// VerifyPassword checks a user's password against the user's SCRAM
// credential (SCRAM-SHA-512 first): derived with the stored salt and
// iterations, the keys must match. SASL PLAIN and the admin API's basic
// authentication share it, so one set of users serves every entry point.
func (s *Security) VerifyPassword(user, password string) bool {
	for _, mech := range []string{config.MechanismSCRAMSHA512, config.MechanismSCRAMSHA256} {
		stored, ok := s.ScramCredential(user, mech)
		if !ok {
			continue
		}
		derived, err := scram.NewCredential(mech, password, stored.Salt, stored.Iterations)
		return err == nil && subtle.ConstantTimeCompare(derived.StoredKey, stored.StoredKey) == 1
	}
	return false
}
