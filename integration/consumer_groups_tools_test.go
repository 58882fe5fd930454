package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerProtocolKafkaTools: a KIP-848 group made by franz-go's
// consumer-protocol members is listed and described by Kafka's own
// kafka-consumer-groups as Kafka's would be: type consumer, its state,
// group and assignment epochs, each member's current and target
// assignment, committed offsets and lag.
func TestConsumerProtocolKafkaTools(t *testing.T) {
	t.Parallel()
	kafkaLibs(t) // skip early without java or mvn
	b := StartBroker(t)
	const topic, group, partitions = "kip848-tools", "kip848-tools-group", 4
	createTopicVia(t, b, topic, partitions)
	producer := b.Client(t, kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceAll(t, producer, recs, 30*time.Second)

	consumers := make([]*kgo.Client, 2)
	for i := range consumers {
		consumers[i] = b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.ServerSideBalancer(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	}
	// Both members in, every partition owned once: the group is stable.
	describe := func() kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, producer)
		if err != nil {
			t.Fatalf("ConsumerGroupDescribe: %v", err)
		}
		return resp.Groups[0]
	}
	consumed := 0
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, cl := range consumers {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			consumed += cl.PollFetches(ctx).NumRecords()
			cancel()
		}
		d := describe()
		if d.ErrorCode == 0 && d.State == "Stable" && len(d.Members) == 2 && consumed >= len(recs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group not stable with two members after 60 s: %+v, %d consumed", d, consumed)
		}
	}
	for _, cl := range consumers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		cancel()
	}
	d := describe()

	const tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	run := func(args ...string) string {
		t.Helper()
		out, err := kafkaTool(t, tool, append([]string{"--bootstrap-server", b.KafkaAddr}, args...)...)
		if err != nil {
			t.Fatalf("kafka-consumer-groups %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	list := run("--list", "--state", "--type")
	t.Logf("list:\n%s", list)
	if !hasRow(list, group, "Consumer", "Stable") {
		t.Errorf("--list --state --type does not show %s as a Stable consumer group:\n%s", group, list)
	}
	state := run("--describe", "--group", group, "--state", "--verbose")
	t.Logf("state:\n%s", state)
	if !hasRow(state, group, "uniform", "Stable", fmt.Sprint(d.Epoch), fmt.Sprint(d.AssignmentEpoch), "2") {
		t.Errorf("--state --verbose does not show assignor, state, epochs %d/%d and 2 members:\n%s", d.Epoch, d.AssignmentEpoch, state)
	}
	members := run("--describe", "--group", group, "--members", "--verbose")
	t.Logf("members:\n%s", members)
	for _, m := range d.Members {
		if !hasRow(members, group, m.MemberID, fmt.Sprint(m.MemberEpoch), "2") {
			t.Errorf("--members --verbose has no row for member %s at epoch %d with 2 partitions:\n%s", m.MemberID, m.MemberEpoch, members)
		}
	}
	offsets := run("--describe", "--group", group)
	for p := range partitions {
		if !hasRow(offsets, group, topic, fmt.Sprint(p)) {
			t.Errorf("--describe has no row for %s/%d:\n%s", topic, p, offsets)
		}
	}
	if strings.Count(offsets, " 0 ") < partitions { // lag 0 everywhere once committed
		t.Errorf("--describe shows lag:\n%s", offsets)
	}
}

// hasRow reports whether a line of out holds every field, as whole
// whitespace-separated words.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		words := map[string]bool{}
		for _, w := range strings.Fields(line) {
			words[w] = true
		}
		all := true
		for _, f := range fields {
			if !words[f] {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
