package integration

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceAcksOne: acks=1 is answered once the batch is on the
// leader's disk, before a majority has it, with the offsets its commit
// gives it (broker/produce_acks.go).
//
//   - mixed: acks=1 producers (not idempotent, as acks=1 producers are)
//     and an idempotent acks=all producer write one partition at once;
//     every acknowledged record is then read back at exactly the offset
//     it was acknowledged with, whichever way each batch was answered.
//   - followers paused: with both followers stopped (SIGSTOP) nothing can
//     commit, yet acks=1 records are acknowledged, at consecutive offsets
//     from the log end, while an acks=all record is not. Resumed, the
//     followers take them, and each is read back at its offset (unless
//     the partition changed leader meanwhile, which loses an acks=1
//     write's uncommitted tail in Kafka too: then each one still present
//     must be at its offset).
func TestProduceAcksOne(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3)
	addrs := kafkaAddrs(bs)

	t.Run("mixed", func(t *testing.T) {
		const topic = "acks1-mixed"
		createReplicatedTopic(t, bs[0], topic, 1, 3, nil)
		before := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
		acked := newAckLedger()
		var wg sync.WaitGroup
		const perProducer = 300
		for i := range 5 {
			opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0)}
			name := fmt.Sprintf("acks1-%d", i)
			if i == 4 {
				name = "idempotent"
			} else {
				opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				var pending sync.WaitGroup
				for n := range perProducer {
					value := fmt.Sprintf("%s-%d", name, n)
					pending.Add(1)
					// Several in flight at once, so that batches of
					// each kind interleave in the partition's log.
					cl.Produce(ctx, &kgo.Record{Value: []byte(value)}, func(r *kgo.Record, err error) {
						defer pending.Done()
						acked.add(value, r.Offset, err)
					})
					if n%10 == 9 {
						pending.Wait()
					}
				}
				pending.Wait()
			}()
		}
		wg.Wait()
		if err := acked.firstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		after := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
		readBackAtOffsets(t, addrs, topic, acked, after[0].Epoch == before[0].Epoch)
	})

	t.Run("followers paused", func(t *testing.T) {
		const topic = "acks1-paused"
		createReplicatedTopic(t, bs[0], topic, 1, 3, nil)
		before := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
		leader := brokerByID(t, bs, before[0].Leader)
		followers := without(bs, before[0].Leader)

		acksOne, err := kgo.NewClient(kgo.SeedBrokers(leader.KafkaAddr), kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0), kgo.RecordRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer acksOne.Close()
		acksAll, err := kgo.NewClient(kgo.SeedBrokers(leader.KafkaAddr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
		if err != nil {
			t.Fatal(err)
		}
		defer acksAll.Close()
		id := topicIDOf(t, bs[0], topic)
		// Committed on all three first: the log end is then known, and
		// both clients have their connections and metadata.
		warm := acksAll.ProduceSync(ctxTimeout(t, 20*time.Second), &kgo.Record{Value: []byte("warm-all")})
		if err := warm.FirstErr(); err != nil {
			t.Fatalf("acks=all before the pause: %v", err)
		}
		if err := acksOne.ProduceSync(ctxTimeout(t, 20*time.Second), &kgo.Record{Value: []byte("warm-one")}).FirstErr(); err != nil {
			t.Fatalf("acks=1 before the pause: %v", err)
		}
		end := warm[0].Record.Offset + 2

		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				for _, f := range followers {
					f.signal(syscall.SIGCONT)
				}
			}
		}
		t.Cleanup(resume)
		for _, f := range followers {
			f.signal(syscall.SIGSTOP)
		}
		paused := time.Now()
		// The leader keeps its lease for 3 s without hearing from a
		// majority; everything below happens well within it.
		acked := newAckLedger()
		const records = 10
		for n := range records {
			value := fmt.Sprintf("paused-%d", n)
			r := &kgo.Record{Value: []byte(value)}
			err := acksOne.ProduceSync(ctxTimeout(t, 2*time.Second), r).FirstErr()
			if err != nil {
				resume()
				t.Fatalf("acks=1 record %d with both followers paused, %v after the pause: %v", n, time.Since(paused).Round(time.Millisecond), err)
			}
			if want := end + int64(n); r.Offset != want {
				resume()
				t.Fatalf("acks=1 record %d acknowledged at offset %d, want %d (the log end %d plus %d)", n, r.Offset, want, end, n)
			}
			acked.add(value, r.Offset, nil)
		}
		t.Logf("%d acks=1 records acknowledged %v after pausing both followers", records, time.Since(paused).Round(time.Millisecond))
		// Raw, so that the broker's own timeout answers it (the client
		// would retry).
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = buildBatch(batchOpts{}, []rec{{Value: []byte("paused-all")}})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := acksAll.SeedBrokers()[0].Request(ctx, req)
		cancel()
		if err != nil {
			resume()
			t.Fatalf("acks=all with both followers paused: %v", err)
		}
		if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.RequestTimedOut.Code {
			resume()
			t.Fatalf("acks=all with both followers paused: error %s, want REQUEST_TIMED_OUT after the request's 1 s", errName(code))
		}
		resume()
		t.Logf("followers resumed %v after the pause", time.Since(paused).Round(time.Millisecond))
		waitClusterView(t, bs, rejoinTimeout)
		after := waitReplicatedLeaders(t, bs, bs, topic, 1, 3, leaderTimeout, nil)
		readBackAtOffsets(t, addrs, topic, acked, after[0].Epoch == before[0].Epoch)
	})
}

// ackLedger records what producers were told.
type ackLedger struct {
	mu       sync.Mutex
	offsetOf map[string]int64
	err      error
}

func newAckLedger() *ackLedger { return &ackLedger{offsetOf: map[string]int64{}} }

func (l *ackLedger) add(value string, offset int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.err == nil {
			l.err = fmt.Errorf("record %s: %w", value, err)
		}
		return
	}
	l.offsetOf[value] = offset
}

func (l *ackLedger) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// readBackAtOffsets consumes partition 0 of topic up to its high
// watermark and checks every acknowledged record: at its acknowledged
// offset, and, when the partition kept its leader (sameLeader), present.
func readBackAtOffsets(t *testing.T, addrs []string, topic string, acked *ackLedger, sameLeader bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	acked.mu.Lock()
	defer acked.mu.Unlock()
	want := len(acked.offsetOf)
	offsetOf := map[string]int64{}
	deadline := time.Now().Add(30 * time.Second)
	for len(offsetOf) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 && !sameLeader && len(offsetOf) > 0 {
			break // the end: what is not there was lost with the leader
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if _, ok := acked.offsetOf[v]; !ok {
				return
			}
			if prev, ok := offsetOf[v]; ok {
				t.Errorf("record %q read twice, at offsets %d and %d", v, prev, r.Offset)
			}
			offsetOf[v] = r.Offset
		})
	}
	missing := 0
	for v, off := range acked.offsetOf {
		got, ok := offsetOf[v]
		switch {
		case ok && got == off:
		case !ok && !sameLeader:
			missing++
		case !ok:
			t.Errorf("record %q acknowledged at offset %d is not in the log, and the partition kept its leader", v, off)
		default:
			t.Errorf("record %q acknowledged at offset %d is at offset %d", v, off, got)
		}
	}
	if missing > 0 {
		t.Logf("%d acks=1 records gone after a change of leader, as Kafka's acks=1 allows", missing)
	}
	t.Logf("%d acknowledged records read back at their offsets", want-missing)
}
