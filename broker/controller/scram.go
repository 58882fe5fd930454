package controller

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/scram"
)

// SCRAM credentials (KIP-554): the cluster stores, per user and mechanism,
// what the SCRAM exchange needs — salt, iteration count, StoredKey and
// ServerKey — and never the password or the salted password.

// ScramCredential is one user's credential for one mechanism. Its JSON is
// the user, then the credential's fields, as it always was.
type ScramCredential struct {
	User string `json:"user"`
	scram.Credential
}

// ScramCredentialKey names a credential to delete.
type ScramCredentialKey struct {
	User      string `json:"user"`
	Mechanism string `json:"mechanism"`
}

// AlterScramCredentials deletes and upserts credentials, all or nothing;
// deleting one that does not exist is RESOURCE_NOT_FOUND.
type AlterScramCredentials struct {
	Deletions  []ScramCredentialKey `json:"deletions,omitempty"`
	Upsertions []ScramCredential    `json:"upsertions,omitempty"`
}

func (AlterScramCredentials) Type() CommandType { return CmdAlterScramCredentials }

// ValidateScramCredential reports what makes c unacceptable, with the
// Kafka error a client gets for it.
func ValidateScramCredential(c ScramCredential) error {
	if err := c.Validate(); err != nil {
		return errorf(scram.Code(err), "%v", err)
	}
	if c.User == "" {
		return errorf(kerr.UnacceptableCredential, "empty user name")
	}
	return nil
}

func (t *txn) alterScramCredentials(c AlterScramCredentials) Result {
	if len(c.Deletions)+len(c.Upsertions) == 0 {
		return Result{}
	}
	next := make(map[string]map[string]ScramCredential, len(t.cur.scram))
	for user, creds := range t.cur.scram {
		next[user] = creds // copied below before any change
	}
	own := map[string]bool{}
	mutable := func(user string) map[string]ScramCredential {
		if !own[user] {
			copied := make(map[string]ScramCredential, len(next[user])+1)
			for m, cred := range next[user] {
				copied[m] = cred
			}
			next[user], own[user] = copied, true
		}
		return next[user]
	}
	for _, d := range c.Deletions {
		if _, ok := next[d.User][d.Mechanism]; !ok {
			return Result{Err: errorf(kerr.ResourceNotFound, "user %q has no %s credential", d.User, d.Mechanism)}
		}
		creds := mutable(d.User)
		delete(creds, d.Mechanism)
		if len(creds) == 0 {
			delete(next, d.User)
		}
	}
	for _, u := range c.Upsertions {
		if err := ValidateScramCredential(u); err != nil {
			return Result{Err: err}
		}
		u.Salt = append([]byte(nil), u.Salt...)
		u.StoredKey = append([]byte(nil), u.StoredKey...)
		u.ServerKey = append([]byte(nil), u.ServerKey...)
		mutable(u.User)[u.Mechanism] = u
	}
	t.next.scram = next
	return Result{Changed: true}
}

// ScramCredential returns user's credential for mechanism.
func (v *View) ScramCredential(user, mechanism string) (ScramCredential, bool) {
	c, ok := v.scram[user][mechanism]
	return c, ok
}

// ScramCredentials lists every credential, sorted by user and mechanism.
func (v *View) ScramCredentials() []ScramCredential {
	var out []ScramCredential
	for _, creds := range v.scram {
		for _, c := range creds {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].Mechanism < out[j].Mechanism
	})
	return out
}
