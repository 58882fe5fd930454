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
	if !auth.cluster(kmsg.ACLOperationAlter) {
		answered := map[string]bool{}
		refuse := func(user string) {
			if answered[user] {
				return
			}
			answered[user] = true
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode = user, kerr.ClusterAuthorizationFailed.Code
			resp.Results = append(resp.Results, r)
		}
		for _, d := range req.Deletions {
			refuse(d.Name)
		}
		for _, u := range req.Upsertions {
			refuse(u.Name)
		}
		return resp, nil
	}

	// Every user named, in first-mention order, with the first problem
	// found among its changes.
	var order []string
	problem := map[string]error{}
	note := func(user string, err error) {
		if _, seen := problem[user]; !seen {
			order = append(order, user)
			problem[user] = nil
		}
		if err != nil && problem[user] == nil {
			problem[user] = err
		}
	}
	seen := map[[2]string]bool{}
	twice := func(user, mechanism string) error {
		key := [2]string{user, mechanism}
		if seen[key] {
			return fmt.Errorf("%w: a user credential cannot be altered twice in the same request", kerr.DuplicateResource)
		}
		seen[key] = true
		return nil
	}
	mechanism := func(code int8) (string, error) {
		if name, ok := scramMechanisms[code]; ok {
			return name, nil
		}
		return "", fmt.Errorf("%w: unknown SCRAM mechanism %d", kerr.UnsupportedSaslMechanism, code)
	}
	var dels []controller.ScramCredentialKey
	var ups []controller.ScramCredential
	for _, d := range req.Deletions {
		mech, err := mechanism(d.Mechanism)
		switch {
		case err != nil:
		case d.Name == "":
			err = fmt.Errorf("%w: username must not be empty", kerr.UnacceptableCredential)
		default:
			if err = twice(d.Name, mech); err == nil {
				if _, ok := s.security.ScramCredential(d.Name, mech); !ok {
					err = fmt.Errorf("%w: attempt to delete a user credential that does not exist", kerr.ResourceNotFound)
				}
			}
		}
		note(d.Name, err)
		if err == nil {
			dels = append(dels, controller.ScramCredentialKey{User: d.Name, Mechanism: mech})
		}
	}
	for _, u := range req.Upsertions {
		mech, err := mechanism(u.Mechanism)
		var cred controller.ScramCredential
		switch {
		case err != nil:
		case u.Name == "":
			err = fmt.Errorf("%w: username must not be empty", kerr.UnacceptableCredential)
		default:
			// The salt and the iteration count are checked where the
			// credential is derived, as the controller checks it again.
			if err = twice(u.Name, mech); err == nil {
				cred, err = broker.ScramCredentialFromSaltedPassword(u.Name, mech, u.Iterations, u.Salt, u.SaltedPassword)
			}
		}
		note(u.Name, err)
		if err == nil {
			ups = append(ups, cred)
		}
	}

	// The users without a problem change together (a user with one bad
	// change keeps all its credentials as they were).
	var okDels []controller.ScramCredentialKey
	var okUps []controller.ScramCredential
	for _, d := range dels {
		if problem[d.User] == nil {
			okDels = append(okDels, d)
		}
	}
	for _, u := range ups {
		if problem[u.User] == nil {
			okUps = append(okUps, u)
		}
	}
	var applyErr error
	if len(okDels)+len(okUps) > 0 {
		applyErr = s.security.AlterScramCredentials(okDels, okUps)
	}
	for _, user := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		err := problem[user]
		if err == nil {
			err = applyErr
		}
		if err != nil {
			r.ErrorCode, r.ErrorMessage = errorCode(err), errorMessage(err)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
