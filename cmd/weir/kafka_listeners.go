package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/kafka"
)

// kafkaListener is one bound Kafka listener and how it is served.
type kafkaListener struct {
	ln   net.Listener
	spec kafka.Listener
}

// listenKafka binds every Kafka listener of the node and loads the TLS
// files of SSL and SASL_SSL ones, so that a port in use or a broken
// certificate stops the broker before it registers. On error nothing
// stays bound.
func listenKafka(node config.Node, logger *slog.Logger) ([]kafkaListener, error) {
	var out []kafkaListener
	fail := func(err error) ([]kafkaListener, error) {
		closeKafkaListeners(out)
		return nil, err
	}
	for _, l := range node.Listeners {
		spec := kafka.Listener{Name: l.Name, SecurityProtocol: l.SecurityProtocol, SASLMechanisms: l.SASLMechanisms, AdvertisedAddr: l.Advertised()}
		if l.TLS != nil {
			r, err := config.NewTLSReloader(*l.TLS, logger.With("listener", l.Name))
			if err != nil {
				return fail(fmt.Errorf("kafka listener %q: %w", l.Name, err))
			}
			spec.TLS = r
		}
		ln, err := net.Listen("tcp", l.Address)
		if err != nil {
			return fail(fmt.Errorf("kafka listener %q: %w", l.Name, err))
		}
		out = append(out, kafkaListener{ln: ln, spec: spec})
	}
	if len(out) == 0 {
		return nil, errors.New("no Kafka listener configured")
	}
	return out, nil
}

func closeKafkaListeners(ls []kafkaListener) {
	for _, l := range ls {
		l.ln.Close()
	}
}

// describeKafkaListeners is "NAME=bound address (advertised address)" for
// each listener, for the start-up log line.
func describeKafkaListeners(ls []kafkaListener) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s=%s (%s, advertised %s)", l.spec.Name, l.ln.Addr(), l.spec.SecurityProtocol, l.spec.AdvertisedAddr)
	}
	return strings.Join(parts, ", ")
}
