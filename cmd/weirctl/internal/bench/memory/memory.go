package memory

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

const (
	// memoryMinBatchMaxBytes is the least --batch-max-bytes: franz-go
	// refuses smaller batches.
	memoryMinBatchMaxBytes = 1 << 10

	// memoryBatchOverhead is what a one-record batch adds to the value: the
	// 61-byte v2 batch header and the record's own framing (length,
	// attributes, timestamp and offset deltas, key and value lengths,
	// header count), rounded up.
	memoryBatchOverhead = 128

	// memoryMinSample keeps --sample from turning the bench into a load
	// generator for the admin API.
	memoryMinSample = 10 * time.Millisecond
)

// memoryFetch is what every consumer asks for in each Fetch request.
type memoryFetch struct {
	MaxBytes          int32 `json:"max_bytes"`
	MaxPartitionBytes int32 `json:"max_partition_bytes"`
	MaxWaitMs         int32 `json:"max_wait_ms"`
	MinBytes          int32 `json:"min_bytes"`
}

type memoryOptions struct {
	partitions    int32
	replicas      int16
	backlogBytes  int64
	recordSize    int
	batchMaxBytes int32
	consumers     int
	stalled       int
	producers     int
	produceBytes  int64
	fetch         memoryFetch
	maxWait       time.Duration
	sample        time.Duration
	maxDuration   time.Duration
}

// validate checks everything that needs no broker and fills in the
// derived fetch settings.
func (o *memoryOptions) validate() error {
	switch {
	case o.partitions < 1:
		return fmt.Errorf("--partitions must be >= 1, got %d", o.partitions)
	case o.replicas == 0 || o.replicas < -1:
		return fmt.Errorf("--replication-factor must be positive or -1, got %d", o.replicas)
	case o.recordSize < 1:
		return fmt.Errorf("--record-size must be positive, got %d", o.recordSize)
	case o.batchMaxBytes < memoryMinBatchMaxBytes:
		return fmt.Errorf("--batch-max-bytes must be at least %d, got %d", memoryMinBatchMaxBytes, o.batchMaxBytes)
	case int64(o.recordSize)+memoryBatchOverhead > int64(o.batchMaxBytes):
		return fmt.Errorf("--record-size %d does not fit a batch of --batch-max-bytes %d (a record needs about %d bytes more)",
			o.recordSize, o.batchMaxBytes, memoryBatchOverhead)
	case o.backlogBytes < int64(o.recordSize):
		return fmt.Errorf("--backlog-bytes must hold at least one record of --record-size %d, got %d", o.recordSize, o.backlogBytes)
	case o.consumers < 1:
		return fmt.Errorf("--consumers must be >= 1, got %d", o.consumers)
	case o.stalled < 0:
		return fmt.Errorf("--stalled must be >= 0, got %d", o.stalled)
	case o.producers < 0:
		return fmt.Errorf("--producers must be >= 0, got %d", o.producers)
	case o.produceBytes < 0:
		return fmt.Errorf("--produce-bytes must be >= 0, got %d", o.produceBytes)
	case o.producers > 0 && o.produceBytes < int64(o.producers)*int64(o.recordSize):
		return fmt.Errorf("--produce-bytes %d is less than one record of %d bytes per producer; give more, or --producers 0",
			o.produceBytes, o.recordSize)
	case o.fetch.MaxBytes < 1 || o.fetch.MaxBytes > harness.MaxFetchMaxBytes:
		return fmt.Errorf("--fetch-max-bytes must be between 1 and %d, got %d", harness.MaxFetchMaxBytes, o.fetch.MaxBytes)
	case o.fetch.MaxPartitionBytes < 1:
		return fmt.Errorf("--fetch-max-partition-bytes must be positive, got %d", o.fetch.MaxPartitionBytes)
	case o.maxWait < time.Millisecond || o.maxWait.Milliseconds() > math.MaxInt32:
		return fmt.Errorf("--fetch-max-wait must be between 1ms and %d ms, got %s", math.MaxInt32, o.maxWait)
	case o.fetch.MinBytes < 0:
		return fmt.Errorf("--fetch-min-bytes must be >= 0, got %d", o.fetch.MinBytes)
	case o.sample < memoryMinSample:
		return fmt.Errorf("--sample must be at least %s, got %s", memoryMinSample, o.sample)
	case o.maxDuration <= 0:
		return fmt.Errorf("--max-duration must be positive, got %s", o.maxDuration)
	}
	o.fetch.MaxWaitMs = int32(o.maxWait.Milliseconds())
	return nil
}

// backlogRecords is how many records each partition of an n-partition
// topic holds in the backlog: --backlog-bytes of --record-size records,
// rounded up, spread evenly.
func (o *memoryOptions) backlogRecords(partitions int) int64 {
	total := (o.backlogBytes + int64(o.recordSize) - 1) / int64(o.recordSize)
	return max(1, (total+int64(partitions)-1)/int64(partitions))
}

// producerRecords is how many records each of --producers produces
// during the consume phase.
func (o *memoryOptions) producerRecords() int64 {
	if o.producers == 0 {
		return 0
	}
	return o.produceBytes / int64(o.recordSize) / int64(o.producers)
}

// NewCommand is weirctl bench memory.
func NewCommand(g *cli.Options) *cobra.Command {
	o := &memoryOptions{}
	cmd := &cobra.Command{
		Use:   "memory TOPIC",
		Short: "Measure broker memory while many consumers fetch a large backlog at once",
		Long: "Fills TOPIC (--partitions, created if missing) with a backlog of --backlog-bytes\n" +
			"in --record-size records (only what it lacks: a repeated run reuses the backlog),\n" +
			"then starts --consumers consumers together, each its own TCP connection to each\n" +
			"partition leader, fetching every partition from the start of the backlog with\n" +
			"--fetch-max-bytes and --fetch-max-partition-bytes, until each has every backlog\n" +
			"record. Meanwhile --producers producers add --produce-bytes more (not read), and\n" +
			"--stalled extra connections send one such Fetch request and never read its answer.\n\n" +
			"Consumers send raw Fetch requests (v12, no fetch session) and walk the record\n" +
			"batches' headers as the answer streams in, without decoding records, so the bench\n" +
			"itself holds little memory. Every consumer must get every backlog offset exactly\n" +
			"once and in order, and all must agree on the batches' checksums.\n\n" +
			"Every --sample, the /metrics of every live broker (found through GET /v1/brokers\n" +
			"on the admin API) are read for the peak resident memory, the peak bytes held by\n" +
			"the fetch memory budget and the request memory pool, and the waits and trimmed\n" +
			"reads counted during the consume phase; series a broker does not export are\n" +
			"reported as n/a. A sampled peak can miss a spike shorter than --sample.\n\n" +
			"The command fails when a consumer does not get every record within\n" +
			"--max-duration, or on a gap, a duplicate or an error in an answer.\n" +
			admin.URLHelp,
		Example: "  weirctl bench memory memory --admin-url 127.0.0.1:9644\n" +
			"  weirctl bench memory memory-small --consumers 10 --backlog-bytes 67108864 --produce-bytes 16777216",
		Args: cobra.ExactArgs(1),
	}
	client := admin.AddURLFlag(cmd, g)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		b := &memoryBench{g: g, o: o, topic: args[0], admin: client(), errOut: cmd.ErrOrStderr()}
		sum, runErr := b.run(cmd.Context())
		if sum != nil {
			if err := sum.write(cmd.OutOrStdout(), g.Format); err != nil {
				return errors.Join(runErr, err)
			}
		}
		return runErr
	}
	fl := cmd.Flags()
	fl.Int32VarP(&o.partitions, "partitions", "p", 8, "partitions if TOPIC has to be created (every partition is read)")
	fl.Int16VarP(&o.replicas, "replication-factor", "r", -1, "replication factor if TOPIC has to be created (-1: broker default)")
	fl.Int64Var(&o.backlogBytes, "backlog-bytes", 2<<30, "backlog every consumer reads, in value bytes, spread over the partitions")
	fl.IntVar(&o.recordSize, "record-size", 16<<10, "value size in bytes of produced records")
	fl.Int32Var(&o.batchMaxBytes, "batch-max-bytes", 1<<20, "producers' max batch size (ProducerBatchMaxBytes)")
	fl.IntVarP(&o.consumers, "consumers", "c", 200, "consumers, each its own connection to each leader, each reading the whole backlog")
	fl.IntVar(&o.stalled, "stalled", 1, "extra connections that send one Fetch request and never read the answer")
	fl.IntVar(&o.producers, "producers", 4, "producers adding records while the consumers read, each its own client")
	fl.Int64Var(&o.produceBytes, "produce-bytes", 256<<20, "value bytes the producers add in total while the consumers read")
	fl.Int32Var(&o.fetch.MaxBytes, "fetch-max-bytes", 50<<20, "every Fetch request's max_bytes")
	fl.Int32Var(&o.fetch.MaxPartitionBytes, "fetch-max-partition-bytes", 10<<20, "every Fetch request's partition_max_bytes")
	fl.DurationVar(&o.maxWait, "fetch-max-wait", 500*time.Millisecond, "every Fetch request's max_wait_ms")
	fl.Int32Var(&o.fetch.MinBytes, "fetch-min-bytes", 1, "every Fetch request's min_bytes")
	fl.DurationVar(&o.sample, "sample", 100*time.Millisecond, "how often to read the brokers' /metrics during the consume phase")
	fl.DurationVar(&o.maxDuration, "max-duration", 15*time.Minute, "fail when a consumer lacks records this long after the consume phase started")
	return cmd
}

// memoryBench is one invocation: its settings, and what it found out
// about the cluster before the consume phase.
type memoryBench struct {
	g      *cli.Options
	o      *memoryOptions
	topic  string
	admin  *admin.Client
	errOut io.Writer

	// brokers are the brokers whose /metrics are read; nil when the
	// admin API did not answer (brokerNote says why).
	brokers    []admin.Broker
	brokerNote string
}
