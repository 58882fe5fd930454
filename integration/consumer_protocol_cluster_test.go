package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster-side helpers of the KIP-848 end-to-end tests
// (consumer_protocol_test.go), with nothing weir-specific: the scenarios
// also run against Apache Kafka.

// vcAdmin is a kadm client over a kgo client seeded with addrs.
func vcAdmin(t testing.TB, addrs []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
		kgo.RetryTimeout(20*time.Second),
		kgo.RequestTimeoutOverhead(3*time.Second),
		kgo.DialTimeout(2*time.Second),
	)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// vcCreateTopic creates topic with partitions partitions of rf replicas
// and waits until Metadata shows a leader and rf replicas for each.
func vcCreateTopic(t testing.TB, adm *kadm.Client, topic string, partitions int32, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("CreateTopic %s (%d partitions, RF %d): %v", topic, partitions, rf, err)
	}
	pollUntil(t, 30*time.Second, fmt.Sprintf("topic %s with %d partitions, RF %d, led", topic, partitions, rf), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		d := td[topic]
		if d.Err != nil {
			return d.Err
		}
		if len(d.Partitions) != int(partitions) {
			return fmt.Errorf("%d partitions", len(d.Partitions))
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 || len(p.Replicas) != int(rf) {
				return fmt.Errorf("partition %d: leader %d replicas %v err %v", p.Partition, p.Leader, p.Replicas, p.Err)
			}
		}
		return nil
	})
}

// vcEndOffsets returns partition -> log end offset (high watermark).
func vcEndOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	var out map[int32]int64
	pollUntil(t, 30*time.Second, "end offsets of "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lo, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			return err
		}
		out = map[int32]int64{}
		lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return nil
	})
	return out
}

// vcCommitted returns the group's committed offsets of topic.
func vcCommitted(t testing.TB, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	var out map[int32]int64
	pollUntil(t, 30*time.Second, "committed offsets of "+group, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fo, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = fo.Error()
		}
		if err != nil {
			return err
		}
		out = map[int32]int64{}
		fo.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				out[o.Partition] = o.At
			}
		})
		return nil
	})
	return out
}

// vcCoordinator returns the node id coordinating group.
func vcCoordinator(t testing.TB, adm *kadm.Client, group string) int32 {
	t.Helper()
	var id int32
	pollUntil(t, 30*time.Second, "FindCoordinator for "+group, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rs := adm.FindGroupCoordinators(ctx, group)
		r, ok := rs[group]
		if !ok {
			return fmt.Errorf("no answer for %s in %v", group, rs)
		}
		if r.Err != nil {
			return r.Err
		}
		id = r.NodeID
		return nil
	})
	return id
}

// vcDescribe waits until ConsumerGroupDescribe shows group Stable with
// members members, every member at the group's epoch with its target
// assignment reached, the members' partitions of topic disjoint and all
// partitions assigned, and the assignor named assignor (if not empty).
// It returns member id -> partitions.
func vcDescribe(t testing.TB, adm *kadm.Client, group, topic string, partitions int32, members int, assignor string, timeout time.Duration) (kadm.DescribedConsumerGroup, map[string][]int32) {
	t.Helper()
	var (
		g   kadm.DescribedConsumerGroup
		out map[string][]int32
	)
	pollUntil(t, timeout, fmt.Sprintf("ConsumerGroupDescribe of %s: Stable, %d members, all %d partitions of %s assigned", group, members, partitions, topic), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return err
		}
		var ok bool
		if g, ok = ds[group]; !ok {
			return fmt.Errorf("group missing from %v", ds.Names())
		}
		if g.Err != nil {
			return g.Err
		}
		if g.State != "Stable" || len(g.Members) != members {
			return fmt.Errorf("state %s with %d members (epoch %d, assignment epoch %d)", g.State, len(g.Members), g.Epoch, g.AssignmentEpoch)
		}
		if assignor != "" && g.AssignorName != assignor {
			return fmt.Errorf("assignor %q, want %q", g.AssignorName, assignor)
		}
		out = map[string][]int32{}
		seen := map[int32]string{}
		for _, m := range g.Members {
			if m.MemberEpoch != g.Epoch {
				return fmt.Errorf("member %s at epoch %d, group at %d", m.MemberID, m.MemberEpoch, g.Epoch)
			}
			got, want := setPartitions(m.Assignment, topic), setPartitions(m.TargetAssignment, topic)
			if !slices.Equal(got, want) {
				return fmt.Errorf("member %s owns %v, target %v", m.MemberID, got, want)
			}
			for _, p := range got {
				if o, dup := seen[p]; dup {
					return fmt.Errorf("partition %d assigned to %s and %s", p, o, m.MemberID)
				}
				seen[p] = m.MemberID
			}
			out[m.MemberID] = got
		}
		if len(seen) != int(partitions) {
			return fmt.Errorf("%d of %d partitions assigned: %v", len(seen), partitions, out)
		}
		return nil
	})
	return g, out
}

// setPartitions returns the partitions of topic in s, sorted.
func setPartitions(s kadm.TopicsSet, topic string) []int32 {
	out := make([]int32, 0, len(s[topic]))
	for p := range s[topic] {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// vcOwned returns the partitions each run owns at the end of its events.
func vcOwned(evs []vcEvent) []int32 {
	owned := map[int32]bool{}
	for _, ev := range evs {
		switch ev.Name {
		case "partitions_assigned":
			for _, tp := range ev.Partitions {
				owned[tp.Partition] = true
			}
		case "partitions_revoked":
			for _, tp := range ev.Partitions {
				delete(owned, tp.Partition)
			}
		case "shutdown_complete":
			clear(owned)
		}
	}
	out := make([]int32, 0, len(owned))
	for p := range owned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// vcAssigned waits until run has been assigned a partition.
func vcAssigned(t *testing.T, p *vcProc, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, p.name+" assigned partitions", func() error {
		p.alive(t)
		if len(vcOwned(p.events(t))) == 0 {
			return errors.New("no partitions_assigned yet")
		}
		return nil
	})
}

// vcFirstRecords waits until run has consumed a record.
func vcFirstRecords(t *testing.T, p *vcProc, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, p.name+" consuming its first records", func() error {
		p.alive(t)
		for _, ev := range p.events(t) {
			if ev.Name == "records_consumed" && ev.Count > 0 {
				return nil
			}
		}
		return errors.New("no records_consumed yet")
	})
}

// vcProducerResult checks a finished VerifiableProducer run and returns
// the acknowledged offsets per partition and the number of send errors.
func vcProducerResult(t *testing.T, p *vcProc, topic string) (map[int32][]int64, int) {
	t.Helper()
	acked := map[int32][]int64{}
	var (
		nerr   int
		firstE string
		done   bool
		sent   int64
		nacked int64
	)
	for _, ev := range p.events(t) {
		switch ev.Name {
		case "producer_send_success":
			if ev.Topic != topic {
				t.Fatalf("producer acknowledged a record of %s", ev.Topic)
			}
			acked[ev.Partition] = append(acked[ev.Partition], ev.Offset)
		case "producer_send_error":
			nerr++
			if firstE == "" {
				firstE = ev.Exception + ": " + ev.Message
			}
		case "tool_data":
			sent, nacked = ev.Sent, ev.Acked
		case "shutdown_complete":
			done = true
		}
	}
	if !done {
		t.Fatalf("producer: no shutdown_complete event")
	}
	n := 0
	for _, offs := range acked {
		n += len(offs)
	}
	if int64(n) != nacked {
		t.Errorf("producer: %d producer_send_success events, tool_data says %d acked (of %d sent)", n, nacked, sent)
	}
	if nerr > 0 {
		t.Logf("producer: %d send errors; first: %s", nerr, firstE)
	}
	return acked, nerr
}

// vcCheckAcked fails the test unless every acknowledged offset lies below
// the log end (the check of the ledger then proves it was consumed) and
// no offset was acknowledged twice.
func vcCheckAcked(t *testing.T, acked map[int32][]int64, leo map[int32]int64) {
	t.Helper()
	bad := 0
	for p, offs := range acked {
		seen := map[int64]bool{}
		for _, o := range offs {
			switch {
			case o < 0 || o >= leo[p]:
				bad++
				if bad <= 10 {
					t.Errorf("partition %d: offset %d acknowledged, but the log ends at %d: an acknowledged record is lost", p, o, leo[p])
				}
			case seen[o]:
				bad++
				if bad <= 10 {
					t.Errorf("partition %d: offset %d acknowledged twice", p, o)
				}
			}
			seen[o] = true
		}
	}
}

func vcReport(t *testing.T, l *vcLedger, leo, committed map[int32]int64, runs ...*vcProc) vcVerdict {
	t.Helper()
	var joins []string
	for _, r := range runs {
		evs := r.events(t)
		log, _ := os.ReadFile(r.logPath)
		l.add(r.name, evs, vcUnannounced(log, l.topic))
		joins = append(joins, r.name+" "+vcJoinTime(evs))
	}
	t.Logf("from startup_complete to the first partitions assigned: %s", strings.Join(joins, ", "))
	v, errs := l.check(leo, committed)
	var total int64
	for _, e := range leo {
		total += e
	}
	t.Logf("%d records in the log (end offsets %v), %d consumed (%d read again after a change of owner), %d ownerships, %d commits (%d failed: %v); committed %v",
		total, leo, l.records, v.duplicates, v.owners, l.commitsOK+l.commitsFailed, l.commitsFailed, l.failures, committed)
	for i, e := range errs {
		if i == 20 {
			t.Errorf("... %d problems in all", len(errs))
			break
		}
		t.Error(e)
	}
	return v
}

// vcJoinTime is how long a run took from startup_complete to its first
// partitions_assigned naming a partition.
func vcJoinTime(evs []vcEvent) string {
	var started int64 = -1
	for _, ev := range evs {
		switch {
		case ev.Name == "startup_complete":
			started = ev.Timestamp
		case ev.Name == "partitions_assigned" && len(ev.Partitions) > 0 && started >= 0:
			return (time.Duration(ev.Timestamp-started) * time.Millisecond).String()
		}
	}
	return "never"
}

// vcWaitDrained waits until the successful commits of the runs reach the
// log end of every partition, failing if a run exits on its own.
func vcWaitDrained(t *testing.T, topic string, leo map[int32]int64, running []*vcProc, all []*vcProc, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, "the consumers committing the log end of every partition", func() error {
		for _, r := range running {
			r.alive(t)
		}
		best := map[int32]int64{}
		for _, r := range all {
			for _, ev := range r.events(t) {
				if ev.Name == "offsets_committed" && ev.Success {
					for _, c := range ev.Offsets {
						if c.Topic == topic {
							best[c.Partition] = max(best[c.Partition], c.Offset)
						}
					}
				}
			}
		}
		for p, end := range leo {
			if best[p] < end {
				return fmt.Errorf("committed %v, log ends %v", best, leo)
			}
		}
		return nil
	})
}

func vcConsumerArgs(addrs []string, topic, group, assignor string) []string {
	args := []string{
		"--bootstrap-server", strings.Join(addrs, ","),
		"--topic", topic,
		"--group-id", group,
		"--group-protocol", "consumer",
		"--reset-policy", "earliest",
	}
	if assignor != "" {
		args = append(args, "--group-remote-assignor", assignor)
	}
	return args
}

func vcProducerArgs(addrs []string, topic string, records, throughput int) []string {
	return []string{
		"--bootstrap-server", strings.Join(addrs, ","),
		"--topic", topic,
		"--max-messages", strconv.Itoa(records),
		"--throughput", strconv.Itoa(throughput),
		"--acks", "-1",
		// Keys spread the records over every partition (the default
		// sticky partitioner would fill one partition per batch).
		"--repeating-keys", "1000",
	}
}
