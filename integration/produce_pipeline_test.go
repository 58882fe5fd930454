package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPipelinedProduceLeaderMoved: an idempotent producer has five
// produce requests in flight on one connection to a partition's leader,
// and the leadership moves to another broker between the second and the
// third. The client sees what Kafka answers: the first two acknowledged
// at their offsets, the last three NOT_LEADER_OR_FOLLOWER, in request
// order on the connection that stayed open. Retried on the new leader
// (with the second, already acknowledged, once more, as a client that
// lost its answer would), each batch lands exactly once and in sequence
// order: the new leader knows the producer's state from the replicated
// log, answers the retried second batch with its original offset and
// takes the third where the second ended.
func TestPipelinedProduceLeaderMoved(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3)
	waitClusterView(t, bs, 30*time.Second)
	// Leadership moves only where the test moves it.
	if code, raw := adminDo(t, bs[0], "PUT", "/v1/cluster_config", `{"upsert":{"enable_leader_balancer":false}}`, nil); code != http.StatusOK {
		t.Fatalf("turning the leader balancer off: %d %s", code, raw)
	}
	const topic, per = "pipeline-moved", 3
	createReplicatedTopic(t, bs[0], topic, 1, 3, nil)
	before := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)[0]
	from := brokerByID(t, bs, before.Leader)

	vers := apiVersions(t, from.KafkaAddr)
	pv := produceVersion(t, vers)
	rc := dialRaw(t, from.KafkaAddr)
	pid, epoch := initProducerID(t, rc, vers)
	batches := make([][]byte, 5)
	reqs := make([]*kmsg.ProduceRequest, len(batches))
	for i := range batches {
		batches[i] = buildBatch(idemOpts(pid, epoch, int32(i*per)), idemRecs(i, per))
		reqs[i] = produceRequestTo(pv, -1, topic, 0, batches[i])
	}

	corr := make([]int32, len(reqs))
	for i := range 2 {
		corr[i] = rc.Send(reqs[i])
	}
	// Both written and committed before the move (seen on another
	// connection; their answers stay unread on this one).
	pollUntil(t, 20*time.Second, "the first two batches committed", func() error {
		if off, _, ec := listOffsetRaw(t, from, topic, 0, -1, 0); ec != 0 || off != 2*per {
			return fmt.Errorf("high watermark %d (error %s), want %d", off, errName(ec), 2*per)
		}
		return nil
	})
	to := moveLeader(t, bs, topic, before)
	t.Logf("leadership of %s/0 moved from broker %d to %d with two answers unread", topic, from.NodeID, to.NodeID)
	for i := 2; i < len(reqs); i++ {
		corr[i] = rc.Send(reqs[i])
	}
	for i, req := range reqs {
		r := produceAnswer(t, req, rc.Recv(req, corr[i], req.Version, 15*time.Second))
		switch {
		case i < 2 && (r.ErrorCode != 0 || r.BaseOffset != int64(i*per)):
			t.Fatalf("request %d, sent before the move: %s at offset %d, want acknowledged at %d", i+1, errName(r.ErrorCode), r.BaseOffset, i*per)
		case i >= 2 && r.ErrorCode != kerr.NotLeaderForPartition.Code:
			t.Fatalf("request %d, sent after the move to the old leader: %s at offset %d, want NOT_LEADER_OR_FOLLOWER", i+1, errName(r.ErrorCode), r.BaseOffset)
		}
	}

	retry := dialRaw(t, to.KafkaAddr)
	for i := 1; i < len(reqs); i++ {
		corr[i] = retry.Send(reqs[i])
	}
	for i := 1; i < len(reqs); i++ {
		r := produceAnswer(t, reqs[i], retry.Recv(reqs[i], corr[i], reqs[i].Version, 15*time.Second))
		if r.ErrorCode != 0 || r.BaseOffset != int64(i*per) {
			t.Fatalf("retry of request %d on the new leader: %s at offset %d, want acknowledged at %d", i+1, errName(r.ErrorCode), r.BaseOffset, i*per)
		}
	}

	got := consumeN(t, to, len(batches)*per, 30*time.Second, []string{topic})
	for i, rec := range got {
		want := fmt.Sprintf("b%d-r%d", i/per, i%per)
		if rec.Offset != int64(i) || string(rec.Value) != want {
			t.Errorf("record %d: offset %d value %q, want offset %d value %q", i, rec.Offset, rec.Value, i, want)
		}
	}
	if off, _, ec := listOffsetRaw(t, to, topic, 0, -1, 0); ec != 0 || off != int64(len(batches)*per) {
		t.Fatalf("high watermark %d (error %s), want %d: each batch once", off, errName(ec), len(batches)*per)
	}
}

// moveLeader hands the leadership of partition 0 of topic, led as cur
// says, to another of its replicas the way an operator does: reorder the
// replicas so that one leads the list (kafka-reassign-partitions), then
// elect the preferred replica (kafka-leader-election). It returns the
// new leader once every broker's Metadata shows it.
func moveLeader(t testing.TB, bs []*Broker, topic string, cur replPartition) *Broker {
	t.Helper()
	md, err := askMetadata(t, bs[0], topic)
	if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	replicas := md.Topics[0].Partitions[0].Replicas
	next := slices.IndexFunc(replicas, func(r int32) bool { return r != cur.Leader })
	target := append([]int32{replicas[next]}, slices.Delete(slices.Clone(replicas), next, next+1)...)
	if err := reassign(t, bs[0], topic, target); err != nil {
		t.Fatalf("reordering the replicas of %s/0 to %v: %v", topic, target, err)
	}
	adm := kadmClient(t, bs)
	set := kadm.TopicsSet{}
	set.Add(topic, 0)
	pollUntil(t, 30*time.Second, "a preferred election of "+topic+"/0", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			return err
		}
		r := res[topic][0]
		switch {
		case r.Err == nil:
			return nil
		case !errors.Is(r.Err, kerr.ElectionNotNeeded):
			return r.Err // the new preferred replica's progress has not reached its leader yet
		}
		// Not needed by a leader whose view does not have the new order
		// yet, or because the new preferred replica leads already.
		md, err := askMetadata(t, bs[0], topic)
		if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 {
			return fmt.Errorf("metadata of %s: %v", topic, err)
		}
		if leader := md.Topics[0].Partitions[0].Leader; leader != target[0] {
			return fmt.Errorf("election not needed, yet %s/0 is led by %d, not %d", topic, leader, target[0])
		}
		return nil
	})
	after := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, func(m map[int32]replPartition) error {
		if m[0].Leader != target[0] {
			return fmt.Errorf("%s/0 led by %d, want %d", topic, m[0].Leader, target[0])
		}
		return nil
	})
	return brokerByID(t, bs, after[0].Leader)
}
