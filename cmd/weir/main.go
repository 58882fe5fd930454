package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/memory"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/kafka"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "weir:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	node, err := config.LoadNode(args, os.Environ)
	if err != nil {
		return err
	}
	logger := newLogger(node.LogLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	reg := prometheus.NewRegistry()
	logFS, err := chaosLogFS(logger)
	if err != nil {
		return err
	}
	b, err := broker.Open(broker.Options{Node: node, Logger: logger, Registerer: reg, Now: testClock(), LogFS: logFS, Context: ctx})
	if err != nil {
		if ctx.Err() != nil {
			// Told to stop while starting: a stop, not a failure.
			logger.Info("shutting down before the broker finished starting", "err", err)
			return nil
		}
		return fmt.Errorf("open broker: %w", err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			logger.Error("closing broker", "err", err)
		}
	}()

	if !b.Properties().Bool("disable_metrics") {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	srv, err := kafka.NewServer(b, kafka.Options{
		MaxRequestBytes:               node.MaxRequestBytes,
		QueuedMaxRequestBytes:         node.QueuedMaxRequestBytes,
		ConnectionMaxUnwrittenBytes:   node.ConnectionMaxUnwrittenBytes,
		ConnectionMaxInflightRequests: node.ConnectionMaxInflightRequests,
		TLSReloadInterval:             node.TLSReloadInterval,
		Logger:                        logger,
		Registerer:                    metricsRegisterer(b, reg),
	})
	if err != nil {
		return err
	}
	if limiter := memoryLimiter(node, logger, func() int64 {
		return b.FetchMemoryStats().Used + srv.RequestMemoryStats().Used
	}); limiter != nil {
		go limiter.Run(ctx)
	}
	kafkaLns, err := listenKafka(node, logger)
	if err != nil {
		return err
	}
	adminLn, err := listenAdmin(ctx, node, logger)
	if err != nil {
		closeKafkaListeners(kafkaLns)
		return err
	}
	admin := newAdminServer(adminHandler(b, reg, logger), logger)

	errc := make(chan error, len(kafkaLns)+1)
	for _, l := range kafkaLns {
		go func() { errc <- srv.ServeListener(l.ln, l.spec) }()
	}
	go func() {
		if err := admin.Serve(adminLn); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin server: %w", err)
		}
	}()
	logger.Info("weir started", "node_id", node.NodeID, "kafka_addr", kafkaLns[0].ln.Addr().String(),
		"listeners", describeKafkaListeners(kafkaLns),
		"admin_addr", adminLn.Addr().String(), "data_dir", node.DataDir, "cluster_id", b.ClusterID())

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case runErr = <-errc:
		logger.Error("server failed", "err", runErr)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(shutdownCtx); err != nil {
		logger.Warn("kafka connections did not close in time", "err", err)
	}
	admin.Shutdown(shutdownCtx)
	return runErr
}

// metricsRegisterer is the registry, unless metrics are disabled.
func metricsRegisterer(b *broker.Broker, reg *prometheus.Registry) prometheus.Registerer {
	if b.Properties().Bool("disable_metrics") {
		return nil
	}
	return reg
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// memoryLimiter sets the Go runtime's soft memory limit as
// memory_limit_bytes says, unless GOMEMLIMIT (which the runtime already
// applied) is set: a fixed limit for a positive value, none for -1, and
// for 0 (the default) one that follows the broker's memory
// (memory.SoftLimit: the collector's headroom for what lies outside
// the fetch and request budgets, none for what they hold, at most 90% of
// the cgroup's or machine's memory), which it returns for the caller to
// run.
func memoryLimiter(node config.Node, logger *slog.Logger, charged func() int64) *memory.SoftLimit {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		if node.MemoryLimitBytes != 0 {
			logger.Info("memory_limit_bytes ignored: GOMEMLIMIT is set", "GOMEMLIMIT", env)
		}
		return nil
	}
	switch {
	case node.MemoryLimitBytes > 0:
		debug.SetMemoryLimit(node.MemoryLimitBytes)
		return nil
	case node.MemoryLimitBytes < 0:
		return nil
	}
	return &memory.SoftLimit{Ceiling: config.AvailableMemory() / 10 * 9, Charged: charged}
}
