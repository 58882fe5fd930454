package group

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStringsLongerThanOldVersionsCarryAreRefused: a group ID, instance
// ID or protocol that flexible versions can send but older ones cannot
// carry is refused, and no group is kept for it (ListGroups v0-v2 would
// otherwise answer every client with a response that does not parse).
func TestStringsLongerThanOldVersionsCarryAreRefused(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	long := strings.Repeat("g", maxStringBytes+1)
	if r := wait(t, joinAsync(c, joinReq(long, joinOpts{})), "join"); r.ErrorCode != kerrCode("INVALID_GROUP_ID") {
		t.Errorf("long group ID: error %d, want INVALID_GROUP_ID", r.ErrorCode)
	}
	if r := wait(t, joinAsync(c, joinReq(long[1:], joinOpts{})), "join"); r.ErrorCode != kerrCode("MEMBER_ID_REQUIRED") {
		t.Errorf("group ID of %d bytes: error %d, want MEMBER_ID_REQUIRED", len(long)-1, r.ErrorCode)
	}
	for name, o := range map[string]joinOpts{
		"instance ID":   {instanceID: long},
		"protocol name": {protocols: []kmsg.JoinGroupRequestProtocol{{Name: long}}},
	} {
		if r := wait(t, joinAsync(c, joinReq("g-"+name, o)), "join"); r.ErrorCode != kerrCode("INVALID_REQUEST") {
			t.Errorf("long %s: error %d, want INVALID_REQUEST", name, r.ErrorCode)
		}
	}
	req := joinReq("g-protocol-type", joinOpts{})
	req.ProtocolType = long
	if r := wait(t, joinAsync(c, req), "join"); r.ErrorCode != kerrCode("INVALID_REQUEST") {
		t.Errorf("long protocol type: error %d, want INVALID_REQUEST", r.ErrorCode)
	}
	if codes := commit(c, long, "", -1, "t", map[int32]int64{0: 1}); codes[0] != kerrCode("INVALID_GROUP_ID") {
		t.Errorf("commit for a long group ID: error %d, want INVALID_GROUP_ID", codes[0])
	}
	_, ids := listGroups(c)
	for id := range ids {
		if len(id) > maxStringBytes || strings.HasPrefix(id, "g-") {
			t.Errorf("group of %d bytes kept", len(id))
		}
	}
}

// TestMemberIDFitsOldVersions: a member ID is made from the client ID,
// which may itself be as long as a string can be; the ID is cut to fit,
// at a character boundary.
func TestMemberIDFitsOldVersions(t *testing.T) {
	// Two bytes a character after the first: the cut falls inside one.
	clientID := "x" + strings.Repeat("é", (maxStringBytes-1)/2)
	if utf8.RuneStart(clientID[maxStringBytes-memberIDSuffixBytes]) {
		t.Fatal("a plain cut would not split a character: the test proves nothing")
	}
	id := newMemberID(clientID)
	if len(id) > maxStringBytes || !utf8.ValidString(id) || !strings.HasPrefix(id, "xé") {
		t.Fatalf("member ID of %d bytes, valid UTF-8 %v", len(id), utf8.ValidString(id))
	}
	if id := newMemberID("client"); !strings.HasPrefix(id, "client-") || len(id) != len("client")+memberIDSuffixBytes {
		t.Fatalf("member ID %q", id)
	}
}
