package group

import (
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxStringBytes is the longest string the protocol's non-flexible
// versions can carry (an int16 length). What a group keeps is shown to
// clients of every version (ListGroups, DescribeGroups, JoinGroup), so a
// longer group ID, instance ID or protocol, which only flexible requests
// can send, is refused rather than kept: past this length the older
// versions' responses would not parse, for every client listing groups.
const maxStringBytes = 32767

// memberIDSuffixBytes is what newMemberID appends to the client ID: "-"
// and a UUID.
const memberIDSuffixBytes = 1 + 36

// joinStringsFit reports whether every string of req the group would keep
// fits in maxStringBytes (the group ID is checked on its own).
func joinStringsFit(req *kmsg.JoinGroupRequest) bool {
	if len(req.ProtocolType) > maxStringBytes || (req.InstanceID != nil && len(*req.InstanceID) > maxStringBytes) {
		return false
	}
	for _, p := range req.Protocols {
		if len(p.Name) > maxStringBytes {
			return false
		}
	}
	return true
}

// memberIDPrefix is the client ID cut (at a character boundary) so that
// a member ID made from it fits in maxStringBytes.
func memberIDPrefix(clientID string) string {
	limit := maxStringBytes - memberIDSuffixBytes
	if len(clientID) <= limit {
		return clientID
	}
	for limit > 0 && !utf8.RuneStart(clientID[limit]) {
		limit--
	}
	return clientID[:limit]
}
