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

func TestParseSeekTarget(t *testing.T) {
	for in, want := range map[string]seekTarget{
		"start":            {kind: seekStart},
		"earliest":         {kind: seekStart},
		"END":              {kind: seekEnd},
		"latest":           {kind: seekEnd},
		"0":                {kind: seekOffset, value: 0},
		"42":               {kind: seekOffset, value: 42},
		"@0":               {kind: seekTimestamp, value: 0},
		" @1717000000000 ": {kind: seekTimestamp, value: 1717000000000},
	} {
		got, err := parseSeekTarget(in)
		if err != nil || got != want {
			t.Errorf("%q: got %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1.5", "x", "@", "@-5", "@soon", "@1.5"} {
		if _, err := parseSeekTarget(bad); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
	for _, s := range []string{"start", "end", "42", "@1000"} {
		tg, _ := parseSeekTarget(s)
		if tg.String() != s {
			t.Errorf("%q prints as %q", s, tg.String())
		}
	}
}

func TestParseStates(t *testing.T) {
	got, err := parseStates([]string{"stable,EMPTY", " Empty ", "preparingrebalance"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Stable", "Empty", "PreparingRebalance"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, err := parseStates(nil); err != nil || got != nil {
		t.Errorf("no filter: %q, %v", got, err)
	}
	_, err = parseStates([]string{"Stable,Sleeping"})
	clitest.WantErrContains(t, err, "Sleeping")
}

func TestParseTopicList(t *testing.T) {
	got, err := parseTopicList([]string{"a, b", "a", ",c,"}, true)
	if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := parseTopicList([]string{" , "}, true); err == nil {
		t.Error("a given but empty --topics must fail")
	}
	if got, err := parseTopicList(nil, false); err != nil || got != nil {
		t.Errorf("unset: %q, %v", got, err)
	}
}

func TestGroupArgumentsAndFlags(t *testing.T) {
	b := []string{"--brokers", "127.0.0.1:1"}
	for _, args := range [][]string{
		{"group", "describe"},
		{"group", "delete"},
		{"group", "list", "extra"},
		{"group", "seek", "--to", "start"},
		{"group", "seek", "a", "b", "--to", "start"},
	} {
		if _, _, err := run(t, "", append(b, args...)...); err == nil {
			t.Errorf("%v: want an argument error", args)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"group", "seek", "g"}, "--to is required"},
		{[]string{"group", "seek", "g", "--to", "yesterday"}, "--to"},
		{[]string{"group", "seek", "g", "--to", "@x"}, "timestamp"},
		{[]string{"group", "seek", "g", "--to", "start", "--topics", ","}, "--topics"},
		{[]string{"group", "list", "--state", "Sleeping"}, "--state"},
	} {
		_, _, err := run(t, "", append(b, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want error mentioning %q, got %v", tc.args, tc.want, err)
		}
	}
}

func TestGroupCommandsAgainstDeadBroker(t *testing.T) {
	for _, args := range [][]string{
		{"group", "list"},
		{"group", "describe", "g"},
		{"group", "delete", "g"},
		{"group", "seek", "g", "--to", "start"},
	} {
		_, _, err := run(t, "", append([]string{"--brokers", "127.0.0.1:1", "--timeout", "500ms"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("%v: want an error naming the broker, got %v", args, err)
		}
	}
}

func listedAndDescribed() (kadm.ListedGroups, kadm.DescribedGroups) {
	listed := kadm.ListedGroups{
		"billing": {Group: "billing", Coordinator: 1, ProtocolType: "consumer", State: "Stable"},
		"audit":   {Group: "audit", Coordinator: 1, ProtocolType: "consumer", State: "Empty"},
		"old":     {Group: "old", Coordinator: 1, ProtocolType: "consumer"}, // ListGroups < v4: no state
		"broken":  {Group: "broken", Coordinator: 1, ProtocolType: "consumer", State: "Stable"},
	}
	described := kadm.DescribedGroups{
		"billing": {Group: "billing", State: "Stable", ProtocolType: "consumer", Members: make([]kadm.DescribedGroupMember, 2)},
		"audit":   {Group: "audit", State: "Empty", ProtocolType: "consumer"},
		"old":     {Group: "old", State: "Empty", ProtocolType: "consumer"},
		"broken":  {Group: "broken", Err: kerr.CoordinatorLoadInProgress},
	}
	return listed, described
}

func TestGroupListOutput(t *testing.T) {
	listed, described := listedAndDescribed()
	all := buildGroupSummaries(listed, described, nil, nil)
	if len(all) != 4 || all[0].Group != "audit" || all[3].Group != "old" {
		t.Fatalf("want 4 groups sorted by name: %+v", all)
	}
	if all[1].Members != 2 || all[1].State != "Stable" || all[3].State != "Empty" {
		t.Errorf("members / state from describe: %+v", all)
	}
	if all[2].Members != -1 || all[2].Error != "COORDINATOR_LOAD_IN_PROGRESS" {
		t.Errorf("describe error: %+v", all[2])
	}

	// The state filter also applies locally, including to groups whose
	// state came only from DescribeGroups.
	empty := buildGroupSummaries(listed, described, nil, []string{"Empty"})
	if len(empty) != 2 || empty[0].Group != "audit" || empty[1].Group != "old" {
		t.Errorf("Empty filter: %+v", empty)
	}

	var buf bytes.Buffer
	if err := printGroupList(&buf, cli.FormatTable, empty); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "GROUP STATE GROUP-TYPE PROTOCOL-TYPE MEMBERS" {
		t.Fatalf("table:\n%s", buf.String())
	}
	if strings.Join(strings.Fields(lines[1]), " ") != "audit Empty classic consumer 0" {
		t.Errorf("row: %q", lines[1])
	}

	buf.Reset()
	err := printGroupList(&buf, cli.FormatJSON, all)
	clitest.WantErrContains(t, err, "broken: COORDINATOR_LOAD_IN_PROGRESS")
	var got []groupSummary
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(got) != 4 || got[1].Group != "billing" || got[1].Members != 2 || got[1].CoordinatorID != 1 {
		t.Errorf("json: %+v", got)
	}

	buf.Reset()
	if err := printGroupList(&buf, cli.FormatJSON, nil); err != nil || strings.TrimSpace(buf.String()) != "[]" {
		t.Errorf("no groups must print [], got %q, %v", buf.String(), err)
	}
}

// emptyGroupLag builds what kadm.Lag returns for a group without members
// that committed 3 of 10 records on p0 and nothing on p1... except that p1 is
// committed at 10, and p2 has an error.
func emptyGroupLag() kadm.DescribedGroupLags {
	g := kadm.DescribedGroup{
		Group:        "audit",
		Coordinator:  kadm.BrokerDetail{NodeID: 1, Host: "127.0.0.1", Port: 9092},
		State:        "Empty",
		ProtocolType: "consumer",
		Protocol:     "",
	}
	var commits kadm.OffsetResponses
	commits.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "orders", Partition: 0, At: 3}})
	commits.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "orders", Partition: 1, At: 10}})
	commits.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "gone", Partition: 0, At: 5}})
	starts := kadm.ListedOffsets{"orders": {
		0: {Topic: "orders", Partition: 0, Offset: 0},
		1: {Topic: "orders", Partition: 1, Offset: 0},
	}}
	ends := kadm.ListedOffsets{
		"orders": {
			0: {Topic: "orders", Partition: 0, Offset: 10},
			1: {Topic: "orders", Partition: 1, Offset: 10},
		},
		"gone": {0: {Topic: "gone", Partition: 0, Err: kerr.UnknownTopicOrPartition}},
	}
	lag := kadm.CalculateGroupLagWithStartOffsets(g, commits, starts, ends)
	return kadm.DescribedGroupLags{"audit": {
		Group: g.Group, Coordinator: g.Coordinator, State: g.State,
		ProtocolType: g.ProtocolType, Protocol: g.Protocol, Lag: lag,
	}}
}

func TestGroupDescribeMemberlessGroupShowsOffsetsAndLag(t *testing.T) {
	d := buildGroupDescription("audit", emptyGroupLag())
	if d.Error != "" || d.State != "Empty" || d.MemberCount != 0 || d.CoordinatorAddr != "127.0.0.1:9092" {
		t.Fatalf("summary: %+v", d)
	}
	if len(d.Partitions) != 3 {
		t.Fatalf("partitions: %+v", d.Partitions)
	}
	gone, p0, p1 := d.Partitions[0], d.Partitions[1], d.Partitions[2]
	if gone.Topic != "gone" || gone.Error != "UNKNOWN_TOPIC_OR_PARTITION" || gone.Lag != -1 || gone.LogEndOffset != -1 {
		t.Errorf("gone: %+v", gone)
	}
	if p0.Topic != "orders" || p0.Partition != 0 || p0.CommittedOffset != 3 || p0.LogEndOffset != 10 || p0.Lag != 7 || p0.MemberID != "" {
		t.Errorf("orders/0: %+v", p0)
	}
	if p1.CommittedOffset != 10 || p1.Lag != 0 {
		t.Errorf("orders/1: %+v", p1)
	}
	if d.TotalLag != 7 {
		t.Errorf("total lag %d, want 7", d.TotalLag)
	}

	var buf bytes.Buffer
	if err := printGroupDescriptions(&buf, cli.FormatTable, []groupDescription{d}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"STATE", "Empty", "COORDINATOR", "1 (127.0.0.1:9092)", "TOTAL-LAG", "COMMITTED-OFFSET", "LOG-END-OFFSET", "UNKNOWN_TOPIC_OR_PARTITION"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "MEMBER-ID  INSTANCE-ID") {
		t.Errorf("member table printed for a group without members:\n%s", out)
	}
	var row []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "orders" && f[1] == "0" {
			row = f
		}
	}
	if strings.Join(row, " ") != "orders 0 3 10 7 -" {
		t.Errorf("orders/0 row: %q\n%s", row, out)
	}

	buf.Reset()
	if err := printGroupDescriptions(&buf, cli.FormatJSON, []groupDescription{d}); err != nil {
		t.Fatal(err)
	}
	var got []groupDescription
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(got) != 1 || got[0].Members == nil || len(got[0].Partitions) != 3 || got[0].Partitions[1].Lag != 7 {
		t.Errorf("json: %+v", got)
	}
	if !strings.Contains(buf.String(), `"members": []`) {
		t.Errorf("members must be [] not null:\n%s", buf.String())
	}
}

func TestGroupDescribeErrors(t *testing.T) {
	lags := kadm.DescribedGroupLags{
		"dead":    {Group: "dead", State: "Dead"},
		"absent":  {Group: "absent", DescribeErr: kerr.GroupIDNotFound},
		"nofetch": {Group: "nofetch", State: "Empty", FetchErr: kerr.CoordinatorNotAvailable},
	}
	var descs []groupDescription
	for _, n := range []string{"dead", "absent", "nofetch", "lost"} {
		descs = append(descs, buildGroupDescription(n, lags))
	}
	if descs[0].Error != "GROUP_ID_NOT_FOUND" || descs[1].Error != "GROUP_ID_NOT_FOUND" ||
		descs[2].Error != "COORDINATOR_NOT_AVAILABLE" || descs[3].Error != "MISSING_RESPONSE" {
		t.Fatalf("errors: %+v", descs)
	}
	var buf bytes.Buffer
	err := printGroupDescriptions(&buf, cli.FormatTable, descs)
	clitest.WantErrContains(t, err, "4 of 4 groups failed")
	clitest.WantErrContains(t, err, "absent: GROUP_ID_NOT_FOUND")
	if n := strings.Count(buf.String(), "GROUP_ID_NOT_FOUND"); n != 2 {
		t.Errorf("want both missing groups reported by name:\n%s", buf.String())
	}
}

func TestGroupDescribeMembersTable(t *testing.T) {
	inst := "static-1"
	d := groupDescription{
		Group: "billing", State: "Stable", ProtocolType: "consumer", Protocol: "cooperative-sticky",
		CoordinatorID: 1, MemberCount: 2,
		Members: []groupMember{
			{MemberID: "m-1", InstanceID: &inst, ClientID: "app", Host: "/10.0.0.1",
				Assignment: []assignedTopic{{Topic: "a", Partitions: []int32{0, 2}}, {Topic: "b", Partitions: []int32{1}}}},
			{MemberID: "m-2", ClientID: "app", Host: "/10.0.0.2", Assignment: []assignedTopic{}},
		},
		Partitions: []groupPartition{
			{Topic: "a", Partition: 0, CommittedOffset: -1, LogStartOffset: 0, LogEndOffset: 5, Lag: 5, MemberID: "m-1"},
		},
	}
	var buf bytes.Buffer
	if err := printGroupDescriptions(&buf, cli.FormatTable, []groupDescription{d}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"cooperative-sticky", "MEMBER-ID", "INSTANCE-ID", "static-1", "/10.0.0.1", "a[0 2] b[1]"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	var row []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "a" && f[1] == "0" {
			row = f
		}
	}
	if strings.Join(row, " ") != "a 0 - 5 5 m-1" {
		t.Errorf("uncommitted assigned partition row: %q\n%s", row, out)
	}
}

func TestAssignmentTopicsDecodesConsumerProtocol(t *testing.T) {
	// Round-trip through the wire encoding, as DescribeGroups delivers it.
	in := kmsg.NewConsumerMemberAssignment()
	in.Version = 1
	for _, tp := range []struct {
		topic string
		ps    []int32
	}{{"zeta", []int32{3, 1}}, {"alpha", []int32{0}}} {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = tp.topic, tp.ps
		in.Topics = append(in.Topics, at)
	}
	var out kmsg.ConsumerMemberAssignment
	if err := out.ReadFrom(in.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	got := assignmentTopics(&out)
	if formatAssignment(got) != "alpha[0] zeta[1 3]" {
		t.Errorf("got %+v", got)
	}
	if a := assignmentTopics(nil); a == nil || len(a) != 0 {
		t.Errorf("nil assignment: %#v", a)
	}
}

func TestGroupDeleteResults(t *testing.T) {
	resps := kadm.DeleteGroupResponses{
		"done":   {Group: "done"},
		"busy":   {Group: "busy", Err: kerr.NonEmptyGroup},
		"absent": {Group: "absent", Err: kerr.GroupIDNotFound, ErrMessage: "Group absent not found."},
	}
	se := &kadm.ShardErrors{Errs: []kadm.ShardError{{
		Req: &kmsg.DeleteGroupsRequest{Groups: []string{"unreachable"}},
		Err: kerr.CoordinatorNotAvailable,
	}}}
	names := []string{"done", "busy", "absent", "unreachable", "lost"}

	var buf bytes.Buffer
	err := printGroupDeleteResults(&buf, cli.FormatJSON, names, resps, se)
	clitest.WantErrContains(t, err, "4 of 5 groups failed")
	var got []groupResult
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	want := []string{"", "NON_EMPTY_GROUP", "GROUP_ID_NOT_FOUND", "COORDINATOR_NOT_AVAILABLE", "MISSING_RESPONSE"}
	for i, w := range want {
		if got[i].Group != names[i] || got[i].Error != w {
			t.Errorf("%d: got %+v, want error %q", i, got[i], w)
		}
	}
	if got[2].ErrorMessage != "Group absent not found." {
		t.Errorf("broker message lost: %+v", got[2])
	}

	buf.Reset()
	err = printGroupDeleteResults(&buf, cli.FormatTable, names[:2], resps, nil)
	clitest.WantErrContains(t, err, "1 of 2 groups failed")
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "GROUP STATUS" ||
		strings.Join(strings.Fields(lines[1]), " ") != "done OK" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "busy NON_EMPTY_GROUP: ") {
		t.Errorf("table:\n%s", buf.String())
	}

	buf.Reset()
	if err := printGroupDeleteResults(&buf, cli.FormatTable, []string{"done"}, resps, nil); err != nil {
		t.Errorf("all deleted must succeed: %v", err)
	}
}

func TestCheckSeekable(t *testing.T) {
	active := kadm.DescribedGroup{Group: "g", State: "Stable", Members: make([]kadm.DescribedGroupMember, 1)}
	err := checkSeekable("g", active)
	clitest.WantErrContains(t, err, "1 active members (state Stable)")
	clitest.WantErrContains(t, err, "stop its consumers")

	if err := checkSeekable("g", kadm.DescribedGroup{State: "PreparingRebalance"}); err == nil {
		t.Error("a rebalancing group must be refused")
	}
	for _, ok := range []kadm.DescribedGroup{
		{State: "Empty"},
		{State: "Dead"},
		{Err: kerr.GroupIDNotFound},
	} {
		if err := checkSeekable("g", ok); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	clitest.WantErrContains(t, checkSeekable("g", kadm.DescribedGroup{Err: kerr.NotCoordinator}), "NOT_COORDINATOR")
}

func seekFixtures() (kadm.TopicsSet, kadm.OffsetResponses, kadm.ListedOffsets, kadm.ListedOffsets) {
	set := kadm.TopicsSet{}
	set.Add("orders", 0, 1, 2)
	var committed kadm.OffsetResponses
	committed.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "orders", Partition: 0, At: 4}})
	committed.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "orders", Partition: 1, At: 9}})
	starts := kadm.ListedOffsets{"orders": {
		0: {Topic: "orders", Partition: 0, Offset: 0},
		1: {Topic: "orders", Partition: 1, Offset: 5},
		2: {Topic: "orders", Partition: 2, Offset: 0},
	}}
	ends := kadm.ListedOffsets{"orders": {
		0: {Topic: "orders", Partition: 0, Offset: 10},
		1: {Topic: "orders", Partition: 1, Offset: 20},
		2: {Topic: "orders", Partition: 2, Err: kerr.NotLeaderForPartition},
	}}
	return set, committed, starts, ends
}

func TestPlanSeek(t *testing.T) {
	set, committed, starts, ends := seekFixtures()
	type pa struct{ before, after int64 }
	check := func(name string, rows []seekRow, want []pa) {
		t.Helper()
		if len(rows) != 3 {
			t.Fatalf("%s: %+v", name, rows)
		}
		for i, w := range want {
			if rows[i].Partition != int32(i) || rows[i].Before != w.before || rows[i].After != w.after {
				t.Errorf("%s partition %d: %+v, want before %d after %d", name, i, rows[i], w.before, w.after)
			}
		}
		if rows[2].Error != "NOT_LEADER_FOR_PARTITION" {
			t.Errorf("%s: partition 2 error %+v", name, rows[2])
		}
	}

	check("start", planSeek(set, committed, seekTarget{kind: seekStart}, starts, ends, nil), []pa{{4, 0}, {9, 5}, {-1, -1}})
	check("end", planSeek(set, committed, seekTarget{kind: seekEnd}, starts, ends, nil), []pa{{4, 10}, {9, 20}, {-1, -1}})

	rows := planSeek(set, committed, seekTarget{kind: seekOffset, value: 12}, starts, ends, nil)
	check("offset", rows, []pa{{4, 10}, {9, 12}, {-1, -1}})
	if rows[0].Note != "clamped to log end offset" || rows[1].Note != "" {
		t.Errorf("clamp notes: %+v", rows)
	}
	rows = planSeek(set, committed, seekTarget{kind: seekOffset, value: 2}, starts, ends, nil)
	if rows[1].After != 5 || rows[1].Note != "clamped to log start offset" || rows[0].After != 2 {
		t.Errorf("clamp to start: %+v", rows)
	}

	byTime := kadm.ListedOffsets{"orders": {
		0: {Topic: "orders", Partition: 0, Offset: 7, Timestamp: 1000},
		1: {Topic: "orders", Partition: 1, Offset: -1},
	}}
	rows = planSeek(set, committed, seekTarget{kind: seekTimestamp, value: 1000}, starts, ends, byTime)
	check("timestamp", rows, []pa{{4, 7}, {9, 20}, {-1, -1}})

	// A topic kadm could not list at all comes back as partition -1.
	gone := kadm.TopicsSet{}
	gone.Add("gone", 0)
	missing := kadm.ListedOffsets{"gone": {-1: {Topic: "gone", Partition: -1, Err: kerr.UnknownTopicOrPartition}}}
	rows = planSeek(gone, nil, seekTarget{kind: seekStart}, missing, missing, nil)
	if len(rows) != 1 || rows[0].Error != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("missing topic: %+v", rows)
	}
	rows = planSeek(gone, nil, seekTarget{kind: seekStart}, kadm.ListedOffsets{}, kadm.ListedOffsets{}, nil)
	if len(rows) != 1 || rows[0].Error == "" {
		t.Errorf("partition absent from ListOffsets must be an error: %+v", rows)
	}

	var badCommit kadm.OffsetResponses
	badCommit.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "orders", Partition: 0}, Err: kerr.UnstableOffsetCommit})
	one := kadm.TopicsSet{}
	one.Add("orders", 0)
	rows = planSeek(one, badCommit, seekTarget{kind: seekEnd}, starts, ends, nil)
	if rows[0].Error != "UNSTABLE_OFFSET_COMMIT" || rows[0].After != -1 {
		t.Errorf("commit fetch error: %+v", rows)
	}
}

func TestSeekResultOutput(t *testing.T) {
	set, committed, starts, ends := seekFixtures()
	res := &seekResult{Group: "g", Target: "12", DryRun: true,
		Partitions: planSeek(set, committed, seekTarget{kind: seekOffset, value: 12}, starts, ends, nil)}

	var buf bytes.Buffer
	err := printSeekResult(&buf, cli.FormatTable, res)
	clitest.WantErrContains(t, err, "1 of 3 partitions failed")
	out := buf.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "TOPIC PARTITION OLD-OFFSET NEW-OFFSET STATUS" {
		t.Fatalf("table:\n%s", out)
	}
	if !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "orders 0 4 10 OK (dry run, not committed) (clamped") {
		t.Errorf("row 0: %q", lines[1])
	}
	if !strings.HasPrefix(strings.Join(strings.Fields(lines[3]), " "), "orders 2 - - NOT_LEADER_FOR_PARTITION") {
		t.Errorf("row 2: %q", lines[3])
	}

	buf.Reset()
	res.DryRun = false
	res.Partitions = res.Partitions[:2]
	if err := printSeekResult(&buf, cli.FormatJSON, res); err != nil {
		t.Fatal(err)
	}
	var got seekResult
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if got.Group != "g" || got.Target != "12" || got.DryRun || len(got.Partitions) != 2 ||
		got.Partitions[1].Before != 9 || got.Partitions[1].After != 12 {
		t.Errorf("json: %+v", got)
	}
}

func TestListedOffsetErrors(t *testing.T) {
	l := kadm.ListedOffsets{"t": {0: {Offset: 3}, 1: {Err: kerr.OffsetNotAvailable}}}
	if o, err := listedOffset(l, "t", 0); o != 3 || err != nil {
		t.Errorf("ok: %d %v", o, err)
	}
	if _, err := listedOffset(l, "t", 1); !errors.Is(err, kerr.OffsetNotAvailable) {
		t.Errorf("partition error: %v", err)
	}
	if _, err := listedOffset(l, "t", 2); !errors.Is(err, errListMissing) {
		t.Errorf("missing: %v", err)
	}
}
