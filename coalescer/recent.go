package coalescer

// recentWays is how many of a partition's latest results range hits look
// into.
const recentWays = 4

// partitionKey names the results that may answer each other's range
// hits: one partition, one isolation level.
type partitionKey struct {
	topicID   [16]byte
	partition int32
	isolation int8
}

func (k *Key) partition() partitionKey {
	return partitionKey{topicID: k.TopicID, partition: k.Partition, isolation: k.Isolation}
}

// recentResults are a partition's latest results with data. Like index
// slots they own no reference: a result is usable only while some holder
// keeps it (tryAcquire).
type recentResults struct {
	results [recentWays]*Result
	next    int
}

// remember adds r to k's recent results, in place of the oldest. The
// caller holds the shard's mutex.
func (m recentByPartition) remember(k partitionKey, r *Result) {
	rr := m[k]
	if rr == nil {
		rr = &recentResults{}
		m[k] = rr
	}
	rr.results[rr.next] = r
	rr.next = (rr.next + 1) % recentWays
}

// acquire takes a reference to each of k's recent results still held by
// someone, oldest first, into held, and returns how many. A partition
// whose results are all gone is forgotten. The caller holds the shard's
// mutex.
func (m recentByPartition) acquire(k partitionKey, held *[recentWays]*Result) int {
	rr := m[k]
	if rr == nil {
		return 0
	}
	n := 0
	for i := range recentWays {
		r := rr.results[(rr.next+i)%recentWays]
		if r != nil && r.tryAcquire() {
			held[n] = r
			n++
		}
	}
	if n == 0 {
		delete(m, k)
	}
	return n
}

type recentByPartition map[partitionKey]*recentResults
