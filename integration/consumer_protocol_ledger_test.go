package integration

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The ledger of the KIP-848 end-to-end tests (consumer_protocol_test.go):
// every VerifiableConsumer run's events replayed partition by partition,
// and the checks made of them.

// vcOwnership is one run's ownership of one partition, from its
// partitions_assigned to its partitions_revoked (or the run's end).
type vcOwnership struct {
	run        string
	start, end int64 // event timestamps, ms
	open       bool
	ranges     [][2]int64 // consumed [min, max], in order
	commits    []int64    // successful commits, in order
	failed     int        // failed commits naming the partition
}

type vcLedger struct {
	topic  string
	owners map[int32][]*vcOwnership // in the order they were opened per run
	errs   []string

	records       int64 // records consumed, duplicates included
	commitsOK     int
	commitsFailed int
	failures      []string // first few failed commit errors
}

func newLedger(topic string) *vcLedger {
	return &vcLedger{topic: topic, owners: map[int32][]*vcOwnership{}}
}

func (l *vcLedger) errorf(format string, args ...any) {
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// add replays one run's events. unannounced names the partitions the
// run's consumer was given while it closed and never announced
// (vcUnannounced): leaving, it revokes them with the rest, once.
func (l *vcLedger) add(run string, evs []vcEvent, unannounced map[int32]bool) {
	owned := map[int32]*vcOwnership{}
	var last int64
	closeAll := func(ts int64) {
		for p, o := range owned {
			o.end, o.open = ts, false
			delete(owned, p)
		}
	}
	for _, ev := range evs {
		last = ev.Timestamp
		switch ev.Name {
		case "partitions_assigned":
			for _, tp := range ev.Partitions {
				if tp.Topic != l.topic {
					l.errorf("%s: assigned %s/%d, a topic it did not subscribe to", run, tp.Topic, tp.Partition)
					continue
				}
				if owned[tp.Partition] != nil {
					l.errorf("%s: assigned partition %d at %d while it already owned it (the consumer protocol assigns incrementally)", run, tp.Partition, ev.Timestamp)
					continue
				}
				o := &vcOwnership{run: run, start: ev.Timestamp, open: true}
				owned[tp.Partition] = o
				l.owners[tp.Partition] = append(l.owners[tp.Partition], o)
			}
		case "partitions_revoked":
			for _, tp := range ev.Partitions {
				o := owned[tp.Partition]
				if tp.Topic == l.topic && o == nil && unannounced[tp.Partition] {
					delete(unannounced, tp.Partition)
					continue
				}
				if tp.Topic != l.topic || o == nil {
					l.errorf("%s: revoked %s/%d at %d, which it did not own", run, tp.Topic, tp.Partition, ev.Timestamp)
					continue
				}
				o.end, o.open = ev.Timestamp, false
				delete(owned, tp.Partition)
			}
		case "records_consumed":
			var sum int64
			for _, s := range ev.Partitions {
				sum += s.Count
				o := owned[s.Partition]
				if s.Topic != l.topic || o == nil {
					l.errorf("%s: consumed %s/%d offsets %d-%d at %d without owning the partition", run, s.Topic, s.Partition, s.MinOffset, s.MaxOffset, ev.Timestamp)
					continue
				}
				if s.Count != s.MaxOffset-s.MinOffset+1 {
					l.errorf("%s: partition %d: %d records in offsets %d-%d (the log has no gaps)", run, s.Partition, s.Count, s.MinOffset, s.MaxOffset)
				}
				o.ranges = append(o.ranges, [2]int64{s.MinOffset, s.MaxOffset})
				l.records += s.Count
			}
			if sum != ev.Count {
				l.errorf("%s: records_consumed at %d: count %d, partitions sum to %d", run, ev.Timestamp, ev.Count, sum)
			}
		case "offsets_committed":
			if !ev.Success {
				l.commitsFailed++
				if len(l.failures) < 5 {
					l.failures = append(l.failures, fmt.Sprintf("%s at %d: %s", run, ev.Timestamp, ev.Error))
				}
			} else {
				l.commitsOK++
			}
			for _, c := range ev.Offsets {
				o := owned[c.Partition]
				if c.Topic != l.topic || o == nil {
					l.errorf("%s: committed %s/%d offset %d at %d without owning the partition", run, c.Topic, c.Partition, c.Offset, ev.Timestamp)
					continue
				}
				if ev.Success {
					o.commits = append(o.commits, c.Offset)
				} else {
					o.failed++
				}
			}
		case "shutdown_complete":
			closeAll(ev.Timestamp)
		}
	}
	closeAll(last)
}

// vcVerdict summarises a ledger checked against the log.
type vcVerdict struct {
	owners, duplicates int64
}

// check replays each partition's owners in order and returns what it
// found wrong, if anything. leo is the log end offset of each partition,
// committed the group's committed offsets at the end.
func (l *vcLedger) check(leo, committed map[int32]int64) (vcVerdict, []string) {
	errs := slices.Clone(l.errs)
	errorf := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	var v vcVerdict
	for _, p := range sortedIDs(leo) {
		end := leo[p]
		owners := slices.Clone(l.owners[p])
		// Opened in time order per run; across runs by timestamp, and an
		// ownership that read nothing before one that did at the same ms.
		slices.SortStableFunc(owners, func(a, b *vcOwnership) int {
			if a.start != b.start {
				return int(a.start - b.start)
			}
			return len(a.ranges) - len(b.ranges)
		})
		v.owners += int64(len(owners))
		var (
			lastCommit int64 = 0 // the last successful commit before this owner (the log starts at 0)
			next       int64 = 0 // one past the highest offset read so far
			prev       *vcOwnership
		)
		for _, o := range owners {
			if prev != nil && prev.end > o.start {
				errorf("partition %d: %s owned it from %d to %d, and %s was assigned it at %d, before %s gave it up", p, prev.run, prev.start, prev.end, o.run, o.start, prev.run)
			}
			if len(o.ranges) > 0 {
				first := o.ranges[0][0]
				switch {
				case first < lastCommit:
					errorf("partition %d: %s started reading at offset %d, below %d, the offset committed by the owners before it: records read twice that were committed", p, o.run, first, lastCommit)
				case first > next:
					errorf("partition %d: %s started reading at offset %d, but offsets %d-%d had not been read by anyone before it", p, o.run, first, next, first-1)
				}
				if first < next {
					v.duplicates += min(next, o.ranges[len(o.ranges)-1][1]+1) - first
				}
				for i := 1; i < len(o.ranges); i++ {
					if got, want := o.ranges[i][0], o.ranges[i-1][1]+1; got != want {
						errorf("partition %d: %s read offsets %d-%d and then from %d, want %d (a gap or a rewind within one ownership)", p, o.run, o.ranges[i-1][0], o.ranges[i-1][1], got, want)
					}
				}
				for _, r := range o.ranges {
					if r[1] >= end {
						errorf("partition %d: %s read offset %d, past the log end %d", p, o.run, r[1], end)
					}
				}
			}
			readTo := int64(-1)
			if len(o.ranges) > 0 {
				readTo = o.ranges[len(o.ranges)-1][1] + 1
			}
			for _, c := range o.commits {
				if c <= lastCommit {
					errorf("partition %d: %s committed offset %d after offset %d had been committed (commits must strictly increase)", p, o.run, c, lastCommit)
				}
				if len(o.ranges) == 0 || c <= o.ranges[0][0] || c > readTo {
					errorf("partition %d: %s committed offset %d, outside what it read (%v)", p, o.run, c, o.ranges)
				}
				lastCommit = max(lastCommit, c)
			}
			if len(o.ranges) > 0 {
				next = max(next, readTo)
			}
			prev = o
		}
		if next != end {
			errorf("partition %d: read up to offset %d, the log ends at %d: records %d-%d never consumed", p, next, end, next, end-1)
		}
		if lastCommit != end {
			errorf("partition %d: last successful commit %d, want the log end %d", p, lastCommit, end)
		}
		if got, ok := committed[p]; !ok || got != end {
			errorf("partition %d: the group's committed offset is %d (present %v), want the log end %d", p, got, ok, end)
		}
	}
	return v, errs
}

// vcLeftUnassigned is the Java consumer's warning for partitions it was
// given while it closed: its onPartitionsAssigned callback can no longer
// run, so the tool never prints partitions_assigned for them, yet the
// consumer counts them as its own and revokes them as it leaves the group.
var vcLeftUnassigned = regexp.MustCompile(`Leaving newly assigned partitions \[([^\]]*)\] marked as non-fetchable`)

// vcUnannounced returns the partitions of topic that a run's log names in
// vcLeftUnassigned warnings.
func vcUnannounced(log []byte, topic string) map[int32]bool {
	parts := map[int32]bool{}
	for _, m := range vcLeftUnassigned.FindAllSubmatch(log, -1) {
		for tp := range strings.SplitSeq(string(m[1]), ",") {
			tp = strings.TrimSpace(tp)
			i := strings.LastIndexByte(tp, '-')
			if i < 0 || tp[:i] != topic {
				continue
			}
			if p, err := strconv.ParseInt(tp[i+1:], 10, 32); err == nil {
				parts[int32(p)] = true
			}
		}
	}
	return parts
}
