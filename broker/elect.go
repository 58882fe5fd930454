package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
)

// Preferred leader election (ElectLeaders, kafka-leader-election).
//
// A partition's preferred leader is its first replica. The leader
// balancer (isr.go) already hands leadership back to it once it is in
// sync and caught up; an election asked for by an operator does the same
// at once, for the partitions named, and says per partition what
// happened. Any broker takes the request: each partition's current leader
// decides and transfers (only it knows whether the preferred replica has
// caught up), so the request is split by leader and sent to each over
// the cluster's RPC (servicePartitionElect). The answer waits, up to the
// request's deadline, until the controller's view shows the new leader,
// so a describe right after it shows what the election did.

// servicePartitionElect asks a broker to hand the leadership of
// partitions it leads to their preferred replicas.
const servicePartitionElect = "partition.elect"

// PartitionRef names a partition.
type PartitionRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// ElectionResult is the outcome of one partition's election: nil, or a
// *kerr.Error wrapped with why (ELECTION_NOT_NEEDED when the preferred
// replica already leads).
type ElectionResult struct {
	PartitionRef
	Err error
}

// electRequest is what one leader is asked to do.
type electRequest struct {
	Partitions []PartitionRef `json:"partitions"`
}

// electReply carries an answer per partition asked about, in order:
// the error's code (0 when elected) and its message.
type electReply struct {
	Codes    []int16  `json:"codes"`
	Messages []string `json:"messages"`
}

// ElectPreferredLeaders elects the preferred replica of each partition in
// refs as its leader; refs nil means every partition of the cluster, in
// which case those whose preferred replica already leads are left out
// of the results, as Kafka does.
func (rs *Replicas) ElectPreferredLeaders(ctx context.Context, refs []PartitionRef) []ElectionResult {
	v := rs.view()
	all := refs == nil
	if all {
		for _, t := range v.Topics() {
			for i := range t.Partitions {
				refs = append(refs, PartitionRef{Topic: t.Name, Partition: int32(i)})
			}
		}
	}
	results := make([]ElectionResult, len(refs))
	byLeader := map[int32][]int{} // leader → indexes into refs
	for i, ref := range refs {
		results[i].PartitionRef = ref
		cp, err := partitionOf(v, ref)
		switch {
		case err != nil:
			results[i].Err = err
		case cp.Leader == cp.Replicas[0]:
			results[i].Err = fmt.Errorf("%w: broker %d already leads %s/%d", kerr.ElectionNotNeeded, cp.Leader, ref.Topic, ref.Partition)
		case cp.Leader < 0:
			results[i].Err = fmt.Errorf("%w: %s/%d has no leader to hand over", kerr.PreferredLeaderNotAvailable, ref.Topic, ref.Partition)
		default:
			byLeader[cp.Leader] = append(byLeader[cp.Leader], i)
		}
	}
	var wg sync.WaitGroup
	for leader, idx := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			asked := make([]PartitionRef, len(idx))
			for j, i := range idx {
				asked[j] = refs[i]
			}
			errs := rs.askToElect(ctx, leader, v, asked)
			for j, i := range idx {
				results[i].Err = errs[j]
			}
		}()
	}
	wg.Wait()
	rs.awaitPreferredLeaders(ctx, results)
	if all {
		results = slices.DeleteFunc(results, func(r ElectionResult) bool { return errors.Is(r.Err, kerr.ElectionNotNeeded) })
	}
	return results
}

func partitionOf(v *controller.View, ref PartitionRef) (controller.Partition, error) {
	t := v.Topic(ref.Topic)
	if t == nil {
		return controller.Partition{}, fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, ref.Topic)
	}
	cp, ok := v.Partition(t.ID, ref.Partition)
	if !ok || len(cp.Replicas) == 0 {
		return controller.Partition{}, fmt.Errorf("%w: %s/%d", kerr.UnknownTopicOrPartition, ref.Topic, ref.Partition)
	}
	return cp, nil
}

// askToElect has leader elect refs' preferred replicas: itself when it is
// this broker, else over RPC. Every ref gets an answer.
func (rs *Replicas) askToElect(ctx context.Context, leader int32, v *controller.View, refs []PartitionRef) []error {
	errs := make([]error, len(refs))
	if leader == rs.node.NodeID {
		for i, ref := range refs {
			errs[i] = rs.electPreferred(ref)
		}
		return errs
	}
	fail := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	reg, ok := v.Broker(leader)
	if !ok {
		return fail(fmt.Errorf("%w: leader %d is not registered", kerr.PreferredLeaderNotAvailable, leader))
	}
	data, err := json.Marshal(electRequest{Partitions: refs})
	if err != nil {
		return fail(fmt.Errorf("%w: %w", kerr.UnknownServerError, err))
	}
	out, err := rs.mux().Call(ctx, reg.RPCAddr, servicePartitionElect, data)
	if err != nil {
		return fail(fmt.Errorf("%w: asking leader %d to elect: %w", kerr.RequestTimedOut, leader, err))
	}
	var reply electReply
	if err := json.Unmarshal(out, &reply); err != nil || len(reply.Codes) != len(refs) || len(reply.Messages) != len(refs) {
		return fail(fmt.Errorf("%w: leader %d answered the election request with %d results for %d partitions", kerr.UnknownServerError, leader, len(reply.Codes), len(refs)))
	}
	for i, code := range reply.Codes {
		if code != 0 {
			errs[i] = fmt.Errorf("%w: %s", kerr.ErrorForCode(code), reply.Messages[i])
		}
	}
	return errs
}

// servePartitionElect runs the elections another broker was asked for on
// the partitions led here.
func (rs *Replicas) servePartitionElect(_ context.Context, _ string, data []byte) ([]byte, error) {
	var req electRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	reply := electReply{Codes: make([]int16, len(req.Partitions)), Messages: make([]string, len(req.Partitions))}
	for i, ref := range req.Partitions {
		if err := rs.electPreferred(ref); err != nil {
			var ke *kerr.Error
			if !errors.As(err, &ke) {
				ke = kerr.UnknownServerError
			}
			reply.Codes[i], reply.Messages[i] = ke.Code, err.Error()
		}
	}
	return json.Marshal(reply)
}

// electPreferred hands the leadership of a partition led here to its
// preferred replica, if that replica may lead now.
func (rs *Replicas) electPreferred(ref PartitionRef) error {
	v := rs.view()
	cp, err := partitionOf(v, ref)
	if err != nil {
		return err
	}
	preferred := cp.Replicas[0]
	if preferred == rs.node.NodeID {
		return fmt.Errorf("%w: broker %d already leads %s/%d", kerr.ElectionNotNeeded, preferred, ref.Topic, ref.Partition)
	}
	t := v.Topic(ref.Topic)
	p := rs.replicaByGroup(partitionGroupName(t.ID, ref.Partition))
	if p == nil || p.LeaderEpoch() < 0 {
		return fmt.Errorf("%w: broker %d does not lead %s/%d", kerr.NotLeaderForPartition, rs.node.NodeID, ref.Topic, ref.Partition)
	}
	lagMax := time.Duration(rs.props.Int("replica_lag_time_max_ms")) * time.Millisecond
	reg, why := rs.preferredReady(p, cp, v, time.Now(), lagMax)
	if why != "" {
		return fmt.Errorf("%w: %s/%d: %s", kerr.PreferredLeaderNotAvailable, ref.Topic, ref.Partition, why)
	}
	rs.logger.Info("electing the preferred replica", "topic", ref.Topic, "partition", ref.Partition, "to", preferred)
	if err := p.group.TransferLeadership(strconv.Itoa(int(preferred)), reg.RPCAddr); err != nil {
		return fmt.Errorf("%w: %s/%d: handing leadership to broker %d: %w", kerr.PreferredLeaderNotAvailable, ref.Topic, ref.Partition, preferred, err)
	}
	return nil
}

// preferredReady says why the partition's preferred replica may not lead
// now ("" when it may): it must be live, in sync and caught up with the
// leader's high watermark. reg is its registration.
func (rs *Replicas) preferredReady(p *Partition, cp controller.Partition, v *controller.View, now time.Time, lagMax time.Duration) (reg controller.BrokerRegistration, why string) {
	preferred := cp.Replicas[0]
	reg, ok := v.Broker(preferred)
	switch {
	case !ok || !v.Live(preferred, now):
		return reg, fmt.Sprintf("the preferred replica, broker %d, is not live", preferred)
	case !slices.Contains(p.tracking.isr(rs.node.NodeID, cp.Replicas, now, lagMax), preferred):
		return reg, fmt.Sprintf("the preferred replica, broker %d, is not in sync", preferred)
	case !p.tracking.current(preferred, p.HighWatermark(), now):
		return reg, fmt.Sprintf("the preferred replica, broker %d, has not caught up with the high watermark", preferred)
	}
	return reg, ""
}

// awaitPreferredLeaders waits, until ctx ends, for the controller's view
// to show each elected partition led by its preferred replica; one that
// does not by then is answered REQUEST_TIMED_OUT.
func (rs *Replicas) awaitPreferredLeaders(ctx context.Context, results []ElectionResult) {
	pending := func() []int {
		v := rs.view()
		var out []int
		for i, r := range results {
			if r.Err != nil {
				continue
			}
			if cp, err := partitionOf(v, r.PartitionRef); err == nil && cp.Leader != cp.Replicas[0] {
				out = append(out, i)
			}
		}
		return out
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		left := pending()
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			for _, i := range left {
				r := &results[i]
				r.Err = fmt.Errorf("%w: leadership of %s/%d was handed to its preferred replica, which Metadata did not show as leader in time", kerr.RequestTimedOut, r.Topic, r.Partition)
			}
			return
		case <-t.C:
		}
	}
}
