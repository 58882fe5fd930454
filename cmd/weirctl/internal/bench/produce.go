package bench

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

type produceOptions struct {
	harness.ProduceOptions
	batchMaxBytes int32
	linger        time.Duration
	compression   string
	acks          string
	partitions    int32
	replicas      int16
}

func (o *produceOptions) validate() error {
	switch {
	case o.Records <= 0:
		return fmt.Errorf("--records must be positive, got %d", o.Records)
	case o.RecordSize < 0:
		return fmt.Errorf("--record-size must be >= 0, got %d", o.RecordSize)
	case o.batchMaxBytes < 0:
		return fmt.Errorf("--batch-max-bytes must be >= 0, got %d", o.batchMaxBytes)
	case o.partitions < 0:
		return fmt.Errorf("--partitions must be >= 0, got %d", o.partitions)
	case o.replicas == 0 || o.replicas < -1:
		return fmt.Errorf("--replication-factor must be positive or -1, got %d", o.replicas)
	case o.replicas != -1 && o.partitions == 0:
		return errors.New("--replication-factor only applies when creating the topic; give --partitions too")
	case o.Duration < 0:
		return fmt.Errorf("--duration must be >= 0, got %s", o.Duration)
	case o.linger < 0:
		return fmt.Errorf("--linger must be >= 0, got %s", o.linger)
	case o.TxnRecords < 0:
		return fmt.Errorf("--transaction-records must be >= 0, got %d", o.TxnRecords)
	}
	return nil
}

func newProduceCommand(g *cli.Options) *cobra.Command {
	o := &produceOptions{}
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce --records records as fast as possible",
		Long: "Produce --records records of --record-size bytes and report throughput\n" +
			"and ack latency (time from handing a record to the client until its\n" +
			"produce promise fires). With --partitions, creates TOPIC if missing,\n" +
			"with --replication-factor replicas per partition (default: the broker's).",
		Example: "  weirctl bench produce bench -p 6 --records 1000000 --record-size 1024 --compression lz4\n" +
			"  weirctl bench produce txn -p 1 --records 100000 --transaction-records 100\n" +
			"  weirctl bench produce bench-rf3 -p 3 --replication-factor 3 --acks all --records 200000 --record-size 1024",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			codec, err := cli.ParseCompression(o.compression)
			if err != nil {
				return err
			}
			acks, err := cli.ParseAcks(o.acks)
			if err != nil {
				return err
			}
			topic := args[0]
			opts := append(g.ProducerOpts(codec, acks), kgo.DefaultProduceTopic(topic))
			if o.batchMaxBytes > 0 {
				opts = append(opts, kgo.ProducerBatchMaxBytes(o.batchMaxBytes))
			}
			if cmd.Flags().Changed("linger") {
				opts = append(opts, kgo.ProducerLinger(o.linger))
			}
			if o.TxnRecords > 0 {
				opts = append(opts, kgo.TransactionalID(fmt.Sprintf("weirctl-bench-%d", time.Now().UnixNano())))
			}
			cl, err := g.NewClient(opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := harness.EnsureTopic(cmd.Context(), g, cl, cmd.ErrOrStderr(), topic, o.partitions, o.replicas); err != nil {
				return err
			}
			sum, runErr := harness.Produce(cmd.Context(), g, cl, cmd.ErrOrStderr(), topic, &o.ProduceOptions)
			if err := sum.Write(cmd.OutOrStdout(), g.Format); err != nil {
				return err
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.Records, "records", 0, "number of records to produce (required)")
	f.IntVar(&o.RecordSize, "record-size", 100, "value size in bytes")
	f.Int32Var(&o.batchMaxBytes, "batch-max-bytes", 0, "max bytes per partition batch (0: client default)")
	f.DurationVar(&o.linger, "linger", 0, "how long to wait to fill batches (default: client default)")
	f.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4, zstd")
	f.StringVar(&o.acks, "acks", "-1", "required acks: -1 (all), 1 (leader), 0 (none)")
	f.Int32VarP(&o.partitions, "partitions", "p", 0, "create TOPIC with this many partitions if it is missing (0: topic must exist)")
	f.Int16VarP(&o.replicas, "replication-factor", "r", -1, "replication factor when --partitions creates TOPIC (-1: broker default)")
	f.DurationVar(&o.Duration, "duration", 0, "stop after this long even if --records are not done (0: no limit)")
	f.Int64Var(&o.TxnRecords, "transaction-records", 0, "write the records in transactions of this many, committed one after the other (0: no transactions)")
	_ = cmd.MarkFlagRequired("records")
	return cmd
}
