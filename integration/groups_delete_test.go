package integration

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer-group deletion: OffsetDelete and DeleteGroups, their refusals for
// groups in use, and deletions surviving a restart.

// TestGroupDeleteOffsetsAndGroups: OffsetDelete refuses topics a non-empty
// consumer group subscribes to (GROUP_SUBSCRIBED_TO_TOPIC) and deletes the
// others; DeleteGroups refuses a non-empty group (NON_EMPTY_GROUP) and an
// unknown one (GROUP_ID_NOT_FOUND); both succeed once the group is empty,
// and the deletions survive a restart.
func TestGroupDeleteOffsetsAndGroups(t *testing.T) {
	b := grpBroker(t)
	const (
		sub   = "del-sub"
		other = "del-other"
		group = "del-g"
	)
	CreateTopic(t, b, sub, 3, nil)
	CreateTopic(t, b, other, 1, nil)
	adm := b.Admin(t)

	m := startMember(t, b, "member", group, sub, memberCfg{})
	grpWait(t, 20*time.Second, "the member owns every partition", func() (bool, string) {
		return len(m.ownedList()) == 3, fmt.Sprintf("owns %v", m.ownedList())
	})
	m.commitExact(sub, map[int32]int64{0: 1, 1: 2, 2: 3})
	m.commitExact(other, map[int32]int64{0: 5})
	want := map[string]map[int32]int64{sub: {0: 1, 1: 2, 2: 3}, other: {0: 5}}
	if got := grpOffsets(t, adm, group); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed offsets %v, want %v", got, want)
	}

	offsetDelete := func(topics map[string][]int32) (int16, map[string]map[int32]int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		for _, topic := range slices.Sorted(maps.Keys(topics)) {
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = topic
			for _, p := range topics[topic] {
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := b.RawRequest(t, req).(*kmsg.OffsetDeleteResponse)
		out := map[string]map[int32]int16{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = map[int32]int16{}
			for _, rp := range rt.Partitions {
				out[rt.Topic][rp.Partition] = rp.ErrorCode
			}
		}
		return resp.ErrorCode, out
	}
	deleteGroups := func(groups ...string) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = groups
		resp := b.RawRequest(t, req).(*kmsg.DeleteGroupsResponse)
		out := map[string]int16{}
		for _, g := range resp.Groups {
			out[g.Group] = g.ErrorCode
		}
		return out
	}

	top, errs := offsetDelete(map[string][]int32{sub: {0, 1, 2}, other: {0}})
	wantErrs := map[string]map[int32]int16{
		sub:   {0: errGroupSubscribedToTopic, 1: errGroupSubscribedToTopic, 2: errGroupSubscribedToTopic},
		other: {0: errNone},
	}
	if top != errNone || fmt.Sprint(errs) != fmt.Sprint(wantErrs) {
		t.Errorf("OffsetDelete on the non-empty group: top-level %d, partitions %v; want 0 and %v", top, errs, wantErrs)
	}
	want = map[string]map[int32]int64{sub: {0: 1, 1: 2, 2: 3}}
	if got := grpOffsets(t, adm, group); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after OffsetDelete on the non-empty group: offsets %v, want %v", got, want)
	}
	if got := deleteGroups(group, "del-never-existed"); fmt.Sprint(got) != fmt.Sprint(map[string]int16{group: errNonEmptyGroup, "del-never-existed": errGroupIDNotFound}) {
		t.Errorf("DeleteGroups [%s del-never-existed]: %v, want NON_EMPTY_GROUP (68) and GROUP_ID_NOT_FOUND (69)", group, got)
	}
	if d := grpDescribe(t, adm, group); d.State != "Stable" || len(d.Members) != 1 {
		t.Errorf("after the refused DeleteGroups: state %q with %d members, want Stable with 1", d.State, len(d.Members))
	}

	m.stop() // LeaveGroup
	grpWait(t, 10*time.Second, "the group is empty", func() (bool, string) {
		d := grpDescribe(t, adm, group)
		return d.State == "Empty" && len(d.Members) == 0, fmt.Sprintf("state %q with %d members", d.State, len(d.Members))
	})
	top, errs = offsetDelete(map[string][]int32{sub: {0, 1}})
	if top != errNone || fmt.Sprint(errs) != fmt.Sprint(map[string]map[int32]int16{sub: {0: 0, 1: 0}}) {
		t.Errorf("OffsetDelete on the empty group: top-level %d, partitions %v; want all 0", top, errs)
	}
	want = map[string]map[int32]int64{sub: {2: 3}}
	if got := grpOffsets(t, adm, group); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after OffsetDelete on the empty group: offsets %v, want %v", got, want)
	}

	// A second group with offsets that stays, to check deletion is by group.
	ctx := ctxTimeout(t, requestTimeout)
	keep := kadm.Offsets{}
	keep.Add(kadm.Offset{Topic: sub, Partition: 0, At: 9, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "del-keep", keep); err != nil {
		t.Fatalf("commit to del-keep: %v", err)
	}

	if got := deleteGroups(group); got[group] != errNone {
		t.Errorf("DeleteGroups of the empty group: %v, want 0", got)
	}
	if got := deleteGroups(group); got[group] != errGroupIDNotFound {
		t.Errorf("DeleteGroups of the deleted group: %v, want GROUP_ID_NOT_FOUND (69)", got)
	}
	checkGone := func(when string) {
		t.Helper()
		if got := grpOffsets(t, adm, group); len(got) != 0 {
			t.Errorf("%s: deleted group has offsets %v", when, got)
		}
		ctx := ctxTimeout(t, requestTimeout)
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatalf("%s: ListGroups: %v", when, err)
		}
		if _, ok := listed[group]; ok {
			t.Errorf("%s: ListGroups still lists the deleted group %s", when, group)
		}
		if _, ok := listed["del-keep"]; !ok {
			t.Errorf("%s: ListGroups does not list del-keep: %v", when, listed.Groups())
		}
		if got := grpOffsets(t, adm, "del-keep"); fmt.Sprint(got) != fmt.Sprint(map[string]map[int32]int64{sub: {0: 9}}) {
			t.Errorf("%s: del-keep offsets %v, want %s/0 at 9", when, got, sub)
		}
	}
	checkGone("after DeleteGroups")

	b.Restart(t)
	adm = b.Admin(t)
	checkGone("after a restart")
	if got := deleteGroups(group); got[group] != errGroupIDNotFound {
		t.Errorf("after a restart DeleteGroups of the deleted group: %v, want GROUP_ID_NOT_FOUND (69)", got)
	}
}
