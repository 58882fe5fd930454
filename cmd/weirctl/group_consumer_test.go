package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func topicsSet(t string, ps ...int32) kadm.TopicsSet {
	s := kadm.TopicsSet{}
	s.Add(t, ps...)
	return s
}

// reconcilingGroup is a consumer-protocol group in the middle of a
// rebalance: m-b joined, the target gives it orders/2 and orders/3, m-a
// still owns orders/2 (it has yet to revoke it) and nobody owns orders/3
// yet. The group committed orders/0..2 and long ago to "gone", a topic since
// deleted; m-b also subscribed to "later", a topic not created yet.
func reconcilingGroup() (kadm.DescribedConsumerGroup, consumerGroupLag) {
	rack := "rack-1"
	inst := "static-b"
	re := "audit-.*"
	cg := kadm.DescribedConsumerGroup{
		Group:           "billing",
		Coordinator:     kadm.BrokerDetail{NodeID: 2, Host: "10.0.0.9", Port: 9092},
		State:           "Reconciling",
		Epoch:           7,
		AssignmentEpoch: 7,
		AssignorName:    "uniform",
		Members: []kadm.ConsumerGroupMember{
			{
				MemberID: "m-b", InstanceID: &inst, RackID: &rack, MemberEpoch: 7,
				ClientID: "app", ClientHost: "/10.0.0.2", MemberType: 1,
				SubscribedTopics: []string{"orders", "later"}, SubscribedTopicRegex: &re,
				Assignment:       kadm.TopicsSet{},
				TargetAssignment: topicsSet("orders", 3, 2),
			},
			{
				MemberID: "m-a", MemberEpoch: 6, ClientID: "app", ClientHost: "/10.0.0.1", MemberType: 1,
				SubscribedTopics: []string{"orders"},
				Assignment:       topicsSet("orders", 2, 1, 0),
				TargetAssignment: topicsSet("orders", 0, 1),
			},
		},
	}
	var commits kadm.OffsetResponses
	for p, at := range []int64{5, 10, 2} {
		commits.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "orders", Partition: int32(p), At: at}})
	}
	commits.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "gone", Partition: 0, At: 4}})
	starts, ends := kadm.ListedOffsets{"orders": {}}, kadm.ListedOffsets{"orders": {}}
	for p := range int32(4) {
		starts["orders"][p] = kadm.ListedOffset{Topic: "orders", Partition: p, Offset: 1}
		ends["orders"][p] = kadm.ListedOffset{Topic: "orders", Partition: p, Offset: 10}
	}
	for _, missing := range []string{"gone", "later"} {
		ends[missing] = map[int32]kadm.ListedOffset{-1: {Topic: missing, Partition: -1, Err: kerr.UnknownTopicOrPartition}}
	}
	return cg, consumerGroupLag{
		commits: kadm.FetchOffsetsResponses{"billing": {Group: "billing", Fetched: commits}},
		starts:  starts,
		ends:    ends,
	}
}

func TestConsumerGroupDescription(t *testing.T) {
	cg, l := reconcilingGroup()
	if got := consumerGroupTopics(cg); !slices.Equal(got, []string{"later", "orders"}) {
		t.Errorf("topics to list offsets of: %q", got)
	}
	d := buildConsumerGroupDescription("billing", cg, l)
	if d.Error != "" || d.GroupType != "consumer" || d.State != "Reconciling" || d.Assignor != "uniform" ||
		d.Protocol != "uniform" || d.ProtocolType != "consumer" || d.MemberCount != 2 || d.CoordinatorAddr != "10.0.0.9:9092" {
		t.Fatalf("summary: %+v", d)
	}
	if d.GroupEpoch == nil || *d.GroupEpoch != 7 || d.TargetAssignmentEpoch == nil || *d.TargetAssignmentEpoch != 7 {
		t.Errorf("epochs: %v %v", d.GroupEpoch, d.TargetAssignmentEpoch)
	}
	b, a := d.Members[0], d.Members[1] // kadm's order, kept
	if b.MemberID != "m-b" || *b.Rack != "rack-1" || *b.MemberEpoch != 7 || *b.SubscribedTopicRegex != "audit-.*" ||
		!slices.Equal(b.SubscribedTopics, []string{"later", "orders"}) || len(b.Assignment) != 0 || b.Assignment == nil ||
		formatAssignment(b.TargetAssignment) != "orders[2 3]" {
		t.Errorf("joining member: %+v", b)
	}
	if a.MemberID != "m-a" || a.Rack != nil || *a.MemberEpoch != 6 || formatAssignment(a.Assignment) != "orders[0 1 2]" ||
		formatAssignment(a.TargetAssignment) != "orders[0 1]" {
		t.Errorf("revoking member: %+v", a)
	}

	// gone/0: committed, topic deleted. orders/0-2: owned by m-a, lag from
	// the commit. orders/3: in m-b's target only, not committed: no owner,
	// lag from the log start. "later" has no partitions: no rows.
	type row struct {
		topic      string
		p          int32
		commit     int64
		end, lag   int64
		member     string
		errorEmpty bool
	}
	want := []row{
		{"gone", 0, 4, -1, -1, "", false},
		{"orders", 0, 5, 10, 5, "m-a", true},
		{"orders", 1, 10, 10, 0, "m-a", true},
		{"orders", 2, 2, 10, 8, "m-a", true},
		{"orders", 3, -1, 10, 9, "", true},
	}
	if len(d.Partitions) != len(want) {
		t.Fatalf("partitions: %+v", d.Partitions)
	}
	for i, w := range want {
		p := d.Partitions[i]
		if p.Topic != w.topic || p.Partition != w.p || p.CommittedOffset != w.commit || p.LogEndOffset != w.end ||
			p.Lag != w.lag || p.MemberID != w.member || (p.Error == "") != w.errorEmpty {
			t.Errorf("row %d: %+v, want %+v", i, p, w)
		}
	}
	if d.Partitions[0].Error != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("deleted topic: %+v", d.Partitions[0])
	}
	if d.TotalLag != 5+8+9 {
		t.Errorf("total lag %d", d.TotalLag)
	}

	var buf bytes.Buffer
	if err := printGroupDescriptions(&buf, cli.FormatTable, []groupDescription{d}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"GROUP-TYPE", "ASSIGNOR", "uniform", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "2 (10.0.0.9:9092)"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PROTOCOL-TYPE") {
		t.Errorf("a consumer-protocol group has no protocol type row:\n%s", out)
	}
	fields := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			fields[f[0]] = strings.Join(f[1:], " ")
		}
	}
	if h := fields["MEMBER-ID"]; h != "INSTANCE-ID RACK CLIENT-ID HOST EPOCH SUBSCRIPTION ASSIGNMENT TARGET-ASSIGNMENT" {
		t.Errorf("member header: %q", h)
	}
	if r := fields["m-b"]; r != "static-b rack-1 app /10.0.0.2 7 later,orders,/audit-.*/ - orders[2 3]" {
		t.Errorf("m-b row: %q\n%s", r, out)
	}
	if r := fields["m-a"]; r != "- - app /10.0.0.1 6 orders orders[0 1 2] orders[0 1]" {
		t.Errorf("m-a row: %q\n%s", r, out)
	}

	buf.Reset()
	if err := printGroupDescriptions(&buf, cli.FormatJSON, []groupDescription{d}); err != nil {
		t.Fatal(err)
	}
	var raw []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	g := raw[0]
	if g["group_type"] != "consumer" || g["group_epoch"] != 7.0 || g["target_assignment_epoch"] != 7.0 || g["assignor"] != "uniform" {
		t.Errorf("json group: %v", g)
	}
	m := g["members"].([]any)[0].(map[string]any)
	if m["member_epoch"] != 7.0 || m["rack"] != "rack-1" || m["subscribed_topic_regex"] != "audit-.*" {
		t.Errorf("json member: %v", m)
	}
	if a, ok := m["assignment"].([]any); !ok || len(a) != 0 {
		t.Errorf("an empty current assignment must be [], got %v", m["assignment"])
	}
	if tgt := m["target_assignment"].([]any); len(tgt) != 1 {
		t.Errorf("json target: %v", tgt)
	}
}

func TestConsumerGroupDescriptionErrors(t *testing.T) {
	cg, l := reconcilingGroup()

	// Committed offsets that could not be fetched: members, no partitions.
	nofetch := l
	nofetch.commits = kadm.FetchOffsetsResponses{"billing": {Group: "billing", Err: kerr.CoordinatorNotAvailable}}
	d := buildConsumerGroupDescription("billing", cg, nofetch)
	if d.Error != "COORDINATOR_NOT_AVAILABLE" || !strings.HasPrefix(d.ErrorMessage, "fetching committed offsets") ||
		d.MemberCount != 2 || len(d.Partitions) != 0 {
		t.Errorf("fetch error: %+v", d)
	}

	// Log offsets that could not be listed: every partition says so.
	nolist := l
	nolist.starts, nolist.ends, nolist.listErr = nil, nil, errors.New("no brokers")
	d = buildConsumerGroupDescription("billing", cg, nolist)
	if d.Error != "no brokers" || len(d.Partitions) != 4 || d.Partitions[1].Lag != -1 || d.Partitions[1].Error == "" {
		t.Errorf("list error: %+v", d)
	}

	// ConsumerGroupDescribe's own error for the group.
	failed := kadm.DescribedConsumerGroup{Group: "billing", Err: kerr.CoordinatorLoadInProgress}
	d = buildConsumerGroupDescription("billing", failed, consumerGroupLag{})
	if d.Error != "COORDINATOR_LOAD_IN_PROGRESS" || d.GroupType != "" || d.GroupEpoch != nil {
		t.Errorf("describe error: %+v", d)
	}
	var buf bytes.Buffer
	err := printGroupDescriptions(&buf, cli.FormatTable, []groupDescription{d})
	clitest.WantErrContains(t, err, "billing: COORDINATOR_LOAD_IN_PROGRESS")
	if strings.Contains(buf.String(), "MEMBERS") {
		t.Errorf("an undescribed group prints only its error:\n%s", buf.String())
	}
}

func TestClassicGroupDescriptionShape(t *testing.T) {
	d := buildGroupDescription("audit", emptyGroupLag())
	if d.GroupType != "classic" || d.GroupEpoch != nil || d.TargetAssignmentEpoch != nil || d.Assignor != "" {
		t.Errorf("classic group: %+v", d)
	}
	var buf bytes.Buffer
	if err := printGroupDescriptions(&buf, cli.FormatJSON, []groupDescription{d}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"group_type": "classic"`, `"group_epoch": null`, `"target_assignment_epoch": null`, `"protocol_type": "consumer"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("missing %s in:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := printGroupDescriptions(&buf, cli.FormatTable, []groupDescription{d}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GROUP-TYPE", "classic", "PROTOCOL-TYPE"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("missing %q in:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), "GROUP-EPOCH") {
		t.Errorf("a classic group has no epochs:\n%s", buf.String())
	}

	// The protocol a classic consumer group's members agreed on is its
	// assignor; other protocol types have none.
	lags := kadm.DescribedGroupLags{
		"billing": {Group: "billing", State: "Stable", ProtocolType: "consumer", Protocol: "range"},
		"sink":    {Group: "sink", State: "Stable", ProtocolType: "connect", Protocol: "sessioned"},
	}
	if d := buildGroupDescription("billing", lags); d.Assignor != "range" || d.Protocol != "range" {
		t.Errorf("classic consumer group: %+v", d)
	}
	if d := buildGroupDescription("sink", lags); d.Assignor != "" || d.Protocol != "sessioned" {
		t.Errorf("connect group: %+v", d)
	}
}

func TestDescribeFallsBackToDescribeGroups(t *testing.T) {
	for _, err := range []error{kerr.GroupIDNotFound, kerr.UnsupportedVersion} {
		if !notConsumerGroup(err) {
			t.Errorf("%v must fall back to DescribeGroups", err)
		}
	}
	for _, err := range []error{nil, kerr.CoordinatorNotAvailable, kerr.GroupAuthorizationFailed} {
		if notConsumerGroup(err) {
			t.Errorf("%v must not fall back", err)
		}
	}

	se := &kadm.ShardErrors{Errs: []kadm.ShardError{
		{Req: &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"a", "b"}}, Err: kerr.CoordinatorNotAvailable},
		{Req: &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"old"}}, Err: errors.New("broker is too old")},
		{Req: &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"v"}}, Err: kerr.UnsupportedVersion},
		{Req: &kmsg.DescribeGroupsRequest{Groups: []string{"c"}}, Err: kerr.NotCoordinator},
	}}
	got := consumerDescribeShardErrs(se)
	if len(got) != 2 || got["a"] != kerr.CoordinatorNotAvailable || got["b"] != kerr.CoordinatorNotAvailable {
		t.Errorf("shard errors kept: %v", got)
	}
	if got := consumerDescribeShardErrs(errors.New("context deadline exceeded")); len(got) != 0 {
		t.Errorf("a non-shard error names no group: %v", got)
	}
}

func TestGroupListConsumerGroups(t *testing.T) {
	listed := kadm.ListedGroups{
		"new":     {Group: "new", Coordinator: 1, GroupType: "consumer", ProtocolType: "consumer", State: "Reconciling"},
		"idle":    {Group: "idle", Coordinator: 1, GroupType: "consumer", ProtocolType: "consumer", State: "Empty"},
		"lost":    {Group: "lost", Coordinator: 1, GroupType: "consumer", ProtocolType: "consumer", State: "Stable"},
		"loaded":  {Group: "loaded", Coordinator: 1, GroupType: "consumer", ProtocolType: "consumer", State: "Stable"},
		"old":     {Group: "old", Coordinator: 1, GroupType: "classic", ProtocolType: "consumer", State: "Stable"},
		"ancient": {Group: "ancient", Coordinator: 1, ProtocolType: "consumer"}, // ListGroups < v4: no state, no type
		"shared":  {Group: "shared", Coordinator: 1, GroupType: "share", ProtocolType: "share", State: "Stable"},
	}
	described := kadm.DescribedGroups{
		"old":     {Group: "old", State: "Stable", ProtocolType: "consumer", Members: make([]kadm.DescribedGroupMember, 1)},
		"ancient": {Group: "ancient", State: "Empty", ProtocolType: "consumer"},
	}
	cdescribed := kadm.DescribedConsumerGroups{
		"new":    {Group: "new", State: "Stable", Members: make([]kadm.ConsumerGroupMember, 3)},
		"idle":   {Group: "idle", State: "Empty"},
		"loaded": {Group: "loaded", Err: kerr.CoordinatorLoadInProgress},
	}
	all := buildGroupSummaries(listed, described, cdescribed, nil)
	byName := map[string]groupSummary{}
	for _, s := range all {
		byName[s.Group] = s
	}
	for name, want := range map[string]groupSummary{
		"new":     {State: "Stable", GroupType: "consumer", ProtocolType: "consumer", Members: 3},
		"idle":    {State: "Empty", GroupType: "consumer", ProtocolType: "consumer", Members: 0},
		"lost":    {State: "Stable", GroupType: "consumer", ProtocolType: "consumer", Members: -1, Error: "MISSING_RESPONSE"},
		"loaded":  {State: "Stable", GroupType: "consumer", ProtocolType: "consumer", Members: -1, Error: "COORDINATOR_LOAD_IN_PROGRESS"},
		"old":     {State: "Stable", GroupType: "classic", ProtocolType: "consumer", Members: 1},
		"ancient": {State: "Empty", GroupType: "classic", ProtocolType: "consumer", Members: 0},
		"shared":  {State: "Stable", GroupType: "share", ProtocolType: "share", Members: -1},
	} {
		got := byName[name]
		if got.State != want.State || got.GroupType != want.GroupType || got.ProtocolType != want.ProtocolType ||
			got.Members != want.Members || got.Error != want.Error {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}

	var buf bytes.Buffer
	err := printGroupList(&buf, cli.FormatTable, buildGroupSummaries(listed, described, cdescribed, []string{"stable"}))
	clitest.WantErrContains(t, err, "could not describe 2 groups")
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	rows := map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows[f[0]] = strings.Join(f[1:], " ")
	}
	if len(rows) != 5 || rows["shared"] != "Stable share share -" || rows["new"] != "Stable consumer consumer 3" || rows["old"] != "Stable classic consumer 1" ||
		rows["lost"] != "Stable consumer consumer -" {
		t.Errorf("table (--state stable):\n%s", buf.String())
	}

	buf.Reset()
	_ = printGroupList(&buf, cli.FormatJSON, all)
	if !strings.Contains(buf.String(), `"group_type": "consumer"`) {
		t.Errorf("json lacks group_type:\n%s", buf.String())
	}
}

func TestCheckConsumerSeekable(t *testing.T) {
	for _, tc := range []struct {
		cg       kadm.DescribedConsumerGroup
		found    bool
		consumer bool
		err      string
	}{
		{found: false},
		{cg: kadm.DescribedConsumerGroup{Err: kerr.GroupIDNotFound}, found: true},
		{cg: kadm.DescribedConsumerGroup{Err: kerr.UnsupportedVersion}, found: true},
		{cg: kadm.DescribedConsumerGroup{State: "Empty"}, found: true, consumer: true},
		{cg: kadm.DescribedConsumerGroup{State: "Stable", Members: make([]kadm.ConsumerGroupMember, 2)}, found: true, consumer: true,
			err: "2 active members (state Stable)"},
		{cg: kadm.DescribedConsumerGroup{Err: kerr.NotCoordinator}, found: true, consumer: true, err: "NOT_COORDINATOR"},
	} {
		consumer, err := checkConsumerSeekable("g", tc.cg, tc.found)
		if consumer != tc.consumer {
			t.Errorf("%+v: consumer %v", tc, consumer)
		}
		if tc.err == "" && err != nil {
			t.Errorf("%+v: %v", tc, err)
		}
		if tc.err != "" {
			clitest.WantErrContains(t, err, tc.err)
		}
	}
}
