package config

import (
	"errors"
	"fmt"
	"net"
)

// DefaultKafkaAddr is kafka_addr when neither it nor listeners is set.
const DefaultKafkaAddr = "127.0.0.1:9092"

// The node's Kafka listeners come from one of two places, never both:
//
//   - the listeners key of the config file, a list of Listener (Kafka's
//     listeners, advertised.listeners and listener.security.protocol.map
//     in one place);
//   - kafka_addr, advertised_kafka_addr and kafka_sasl_mechanisms, which
//     make one listener called PLAINTEXT, or SASL_PLAINTEXT when
//     mechanisms are set, as every broker had before listeners existed.
//
// Either way Node.Listeners lists them, and KafkaAddr and
// AdvertisedKafkaAddr are the first listener's, which is the broker's
// default address (for tools that know one address per broker).

// resolveListeners fills Node.Listeners from whichever keys were set and
// validates the node.
func (n *Node) resolveListeners() error {
	if len(n.Listeners) > 0 {
		var errs []error
		for _, k := range []struct {
			key string
			set bool
		}{
			{"kafka_addr", n.KafkaAddr != ""},
			{"advertised_kafka_addr", n.AdvertisedKafkaAddr != ""},
			{"kafka_sasl_mechanisms", len(n.KafkaSASLMechanisms) > 0},
		} {
			if k.set {
				errs = append(errs, fmt.Errorf("%s: not allowed with listeners; give each listener its address, advertised_address and sasl_mechanisms instead", k.key))
			}
		}
		if err := errors.Join(append(errs, n.Validate())...); err != nil {
			return err
		}
		n.KafkaAddr, n.AdvertisedKafkaAddr = n.Listeners[0].Address, n.Listeners[0].Advertised()
		return nil
	}
	if n.KafkaAddr == "" {
		n.KafkaAddr = DefaultKafkaAddr
	}
	if n.AdvertisedKafkaAddr == "" {
		n.AdvertisedKafkaAddr = n.KafkaAddr
	}
	if err := n.Validate(); err != nil {
		return err
	}
	n.Listeners = []Listener{n.legacyListener()}
	return nil
}

// legacyListener is the listener kafka_addr, advertised_kafka_addr and
// kafka_sasl_mechanisms describe, named after its protocol as Kafka names
// a listener given without a name.
func (n *Node) legacyListener() Listener {
	l := Listener{Name: string(ProtocolPlaintext), Address: n.KafkaAddr, AdvertisedAddress: n.AdvertisedKafkaAddr,
		SecurityProtocol: ProtocolPlaintext}
	if len(n.KafkaSASLMechanisms) > 0 {
		l.Name, l.SecurityProtocol = string(ProtocolSASLPlaintext), ProtocolSASLPlaintext
		l.SASLMechanisms = append([]string(nil), n.KafkaSASLMechanisms...)
	}
	return l
}

// validateKafkaListeners checks the listeners, or the keys that make the
// one listener when there are none.
func (n Node) validateKafkaListeners() []error {
	if len(n.Listeners) > 0 {
		if err := ValidateListeners(n.Listeners); err != nil {
			return []error{err}
		}
		return nil
	}
	var errs []error
	for _, a := range []struct{ key, addr string }{{"kafka_addr", n.KafkaAddr}, {"advertised_kafka_addr", n.AdvertisedKafkaAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", a.key, a.addr, err))
		}
	}
	if host, _, err := net.SplitHostPort(n.AdvertisedKafkaAddr); err == nil {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			errs = append(errs, fmt.Errorf("advertised_kafka_addr %q: clients cannot connect to an unspecified address; set the address they should use", n.AdvertisedKafkaAddr))
		}
	}
	for _, m := range n.KafkaSASLMechanisms {
		if m != MechanismPlain && m != MechanismSCRAMSHA256 && m != MechanismSCRAMSHA512 {
			errs = append(errs, fmt.Errorf("kafka_sasl_mechanisms: unknown mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", m))
		}
	}
	return errs
}
