package kafka

// DescribeUserScramCredentials v0 and AlterUserScramCredentials v0
// (KIP-554).
//
// Behaviour, as Kafka's:
//   - Credentials live in the controller (salt, iterations, StoredKey,
//     ServerKey: never a password) and apply on every broker at once.
//   - Describe with no users (null or empty) lists every user that has a
//     credential; a named user without one is RESOURCE_NOT_FOUND, a user
//     named twice DUPLICATE_RESOURCE. Each credential shows its mechanism
//     and iterations only.
//   - Alter answers once per user named. A user whose changes include an
//     unknown mechanism (UNSUPPORTED_SASL_MECHANISM), an empty name, too
//     few or too many iterations (4096-16384) or an empty salt or salted
//     password (UNACCEPTABLE_CREDENTIAL), the same mechanism twice
//     (DUPLICATE_RESOURCE) or the deletion of a credential it does not have
//     (RESOURCE_NOT_FOUND) changes nothing; the other users' changes are
//     applied together.
//   - Authorization: Describe needs DESCRIBE on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED at the top level and for each user
//     named; Alter needs ALTER on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED for each user named and nothing
//     changes.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
)

// scramMechanisms maps the protocol's mechanism codes to names.
var scramMechanisms = map[int8]string{1: config.MechanismSCRAMSHA256, 2: config.MechanismSCRAMSHA512}

func scramMechanismCode(name string) int8 {
	for code, n := range scramMechanisms {
		if n == name {
			return code
		}
	}
	return 0
}

func (s *Server) handleDescribeUserScramCredentials(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	auth := c.authorizer()
	if !auth.cluster(kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, u := range req.Users {
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode = u.Name, resp.ErrorCode
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	byUser := map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
	var users []string
	for _, cred := range s.security.ScramCredentials() {
		if _, seen := byUser[cred.User]; !seen {
			users = append(users, cred.User)
		}
		info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		info.Mechanism, info.Iterations = scramMechanismCode(cred.Mechanism), cred.Iterations
		byUser[cred.User] = append(byUser[cred.User], info)
	}
	result := func(user string, err error) {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = user
		if err != nil {
			r.ErrorCode, r.ErrorMessage = errorCode(err), errorMessage(err)
		} else {
			r.CredentialInfos = byUser[user]
		}
		resp.Results = append(resp.Results, r)
	}
	if len(req.Users) == 0 {
		for _, u := range users {
			result(u, nil)
		}
		return resp, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	answered := map[string]bool{}
	for _, u := range req.Users {
		if answered[u.Name] {
			continue
		}
		answered[u.Name] = true
		switch {
		case count[u.Name] > 1:
			result(u.Name, fmt.Errorf("%w: cannot describe SCRAM credentials for the same user twice in a single request", kerr.DuplicateResource))
		case len(byUser[u.Name]) == 0:
			result(u.Name, fmt.Errorf("%w: attempt to describe nonexistent SCRAM credentials for user %s", kerr.ResourceNotFound, u.Name))
		default:
			result(u.Name, nil)
		}
	}
	return resp, nil
}

func (s *Server) handleAlterUserScramCredentials(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	auth := c.authorizer()
	a := scramAlteration{security: s.security, problem: map[string]error{}, seen: map[[2]string]bool{}}
	if !auth.cluster(kmsg.ACLOperationAlter) {
		for _, d := range req.Deletions {
			a.note(d.Name, kerr.ClusterAuthorizationFailed)
		}
		for _, u := range req.Upsertions {
			a.note(u.Name, kerr.ClusterAuthorizationFailed)
		}
		resp.Results = a.results(nil)
		return resp, nil
	}
	for _, d := range req.Deletions {
		a.delete(d)
	}
	for _, u := range req.Upsertions {
		a.upsert(u)
	}
	resp.Results = a.results(a.apply())
	return resp, nil
}

// scramAlteration is one AlterUserScramCredentials request being checked
// and applied: every user named, in first-mention order, with the first
// problem found among its changes, and the changes that passed.
type scramAlteration struct {
	security security
	order    []string
	problem  map[string]error
	seen     map[[2]string]bool // user and mechanism already changed
	dels     []controller.ScramCredentialKey
	ups      []controller.ScramCredential
}

func (a *scramAlteration) note(user string, err error) {
	if _, seen := a.problem[user]; !seen {
		a.order = append(a.order, user)
		a.problem[user] = nil
	}
	if err != nil && a.problem[user] == nil {
		a.problem[user] = err
	}
}

// check refuses what Kafka refuses of any change: an unknown mechanism,
// an empty user name, a second change of one credential.
func (a *scramAlteration) check(user string, code int8) (mechanism string, err error) {
	mechanism, ok := scramMechanisms[code]
	switch {
	case !ok:
		return "", fmt.Errorf("%w: unknown SCRAM mechanism %d", kerr.UnsupportedSaslMechanism, code)
	case user == "":
		return "", fmt.Errorf("%w: username must not be empty", kerr.UnacceptableCredential)
	case a.seen[[2]string{user, mechanism}]:
		return "", fmt.Errorf("%w: a user credential cannot be altered twice in the same request", kerr.DuplicateResource)
	}
	a.seen[[2]string{user, mechanism}] = true
	return mechanism, nil
}

func (a *scramAlteration) delete(d kmsg.AlterUserSCRAMCredentialsRequestDeletion) {
	mech, err := a.check(d.Name, d.Mechanism)
	if err == nil {
		if _, ok := a.security.ScramCredential(d.Name, mech); !ok {
			err = fmt.Errorf("%w: attempt to delete a user credential that does not exist", kerr.ResourceNotFound)
		}
	}
	a.note(d.Name, err)
	if err == nil {
		a.dels = append(a.dels, controller.ScramCredentialKey{User: d.Name, Mechanism: mech})
	}
}

func (a *scramAlteration) upsert(u kmsg.AlterUserSCRAMCredentialsRequestUpsertion) {
	mech, err := a.check(u.Name, u.Mechanism)
	var cred controller.ScramCredential
	if err == nil {
		// The salt and the iteration count are checked where the
		// credential is derived, as the controller checks it again.
		cred, err = broker.ScramCredentialFromSaltedPassword(u.Name, mech, u.Iterations, u.Salt, u.SaltedPassword)
	}
	a.note(u.Name, err)
	if err == nil {
		a.ups = append(a.ups, cred)
	}
}

// apply changes the credentials of the users without a problem, together
// (a user with one bad change keeps all its credentials as they were).
func (a *scramAlteration) apply() error {
	var dels []controller.ScramCredentialKey
	var ups []controller.ScramCredential
	for _, d := range a.dels {
		if a.problem[d.User] == nil {
			dels = append(dels, d)
		}
	}
	for _, u := range a.ups {
		if a.problem[u.User] == nil {
			ups = append(ups, u)
		}
	}
	if len(dels)+len(ups) == 0 {
		return nil
	}
	return a.security.AlterScramCredentials(dels, ups)
}

// results answers each user with its problem, or applyErr.
func (a *scramAlteration) results(applyErr error) []kmsg.AlterUserSCRAMCredentialsResponseResult {
	out := make([]kmsg.AlterUserSCRAMCredentialsResponseResult, 0, len(a.order))
	for _, user := range a.order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		err := a.problem[user]
		if err == nil {
			err = applyErr
		}
		if err != nil {
			r.ErrorCode, r.ErrorMessage = errorCode(err), errorMessage(err)
		}
		out = append(out, r)
	}
	return out
}
