package integration

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// configPropagation bounds how long a cluster property change takes to
// reach every broker.
const configPropagation = 15 * time.Second

// askConfig asks broker b for one config of a resource (DescribeConfigs
// v4, with synonyms) and returns its value and source.
func askConfig(t testing.TB, b *Broker, typ kmsg.ConfigResourceType, resource, name string) (string, kmsg.ConfigSource, error) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = typ, resource, []string{name}
	req.Resources = append(req.Resources, rr)
	resp, err := ask(t, b, req)
	if err != nil {
		return "", 0, fmt.Errorf("DescribeConfigs to node %d: %w", b.NodeID, err)
	}
	dr := resp.(*kmsg.DescribeConfigsResponse)
	if len(dr.Resources) != 1 {
		return "", 0, fmt.Errorf("node %d: %d resources", b.NodeID, len(dr.Resources))
	}
	r := dr.Resources[0]
	if r.ErrorCode != 0 {
		return "", 0, fmt.Errorf("node %d: %s %q", b.NodeID, errName(r.ErrorCode), derefStr(r.ErrorMessage))
	}
	for _, c := range r.Configs {
		if c.Name == name {
			return derefStr(c.Value), c.Source, nil
		}
	}
	return "", 0, fmt.Errorf("node %d: %s not described", b.NodeID, name)
}

// waitConfigEverywhere polls every broker until resource's config name has
// value from source.
func waitConfigEverywhere(t testing.TB, bs []*Broker, typ kmsg.ConfigResourceType, resource, name, value string, source kmsg.ConfigSource) {
	t.Helper()
	for _, b := range bs {
		pollUntil(t, configPropagation, fmt.Sprintf("node %d: %s of %q = %s (%s)", b.NodeID, name, resource, value, source), func() error {
			v, s, err := askConfig(t, b, typ, resource, name)
			if err != nil {
				return err
			}
			if v != value || s != source {
				return fmt.Errorf("%s = %q from %s", name, v, s)
			}
			return nil
		})
	}
}

// restartAll stops every broker, then starts them all together (a lone
// broker of three cannot elect a controller) and waits for the cluster.
func restartAll(t testing.TB, bs []*Broker) {
	t.Helper()
	for _, b := range bs {
		b.Stop(t)
	}
	deadline := time.Now().Add(clusterTimeout)
	for _, b := range bs {
		if err := b.launch(); err != nil {
			t.Fatalf("starting node %d again: %v", b.NodeID, err)
		}
	}
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.waitReady(time.Until(deadline)); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", b.NodeID, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("restarting the cluster: %v", err)
	}
	waitClusterView(t, bs, clusterTimeout)
}

// TestClusterConfigKafkaAPI: cluster properties changed through Kafka's
// config APIs on the cluster-default BROKER resource (kadm with no
// brokers) reach every broker, become the default of new topics, survive
// a restart of the whole cluster, refuse bad input naming the property,
// and DELETE resets them.
func TestClusterConfigKafkaAPI(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 3)
	broker := kmsg.ConfigResourceTypeBroker
	adm := kadm.NewClient(directClient(t, bs[1]))
	const (
		newRetention     = "7200000"
		defaultRetention = "604800000"
	)

	alter := func(configs ...kadm.AlterConfig) kadm.AlterConfigsResponse {
		t.Helper()
		resp, err := adm.AlterBrokerConfigs(ctxTimeout(t, requestTimeout), configs)
		if err != nil {
			t.Fatalf("AlterBrokerConfigs: %v", err)
		}
		if len(resp) != 1 || resp[0].Name != "" {
			t.Fatalf("AlterBrokerConfigs: responses %+v, want one for the cluster default", resp)
		}
		return resp[0]
	}

	// Set through the Kafka name; every broker describes it under either
	// name when asked for it by name.
	if r := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr(newRetention)}); r.Err != nil {
		t.Fatalf("set log.retention.ms: %v (%s)", r.Err, r.ErrMessage)
	}
	waitConfigEverywhere(t, bs, broker, "", "log_retention_ms", newRetention, kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	waitConfigEverywhere(t, bs, broker, "", "log.retention.ms", newRetention, kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// kadm's cluster-level describe lists it under the Kafka name only,
	// synonyms as Kafka lists them.
	rcs, err := adm.DescribeBrokerConfigs(ctxTimeout(t, requestTimeout))
	if err != nil {
		t.Fatalf("DescribeBrokerConfigs: %v", err)
	}
	rc, err := rcs.On("", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("DescribeBrokerConfigs: %v %v", err, rc.Err)
	}
	var found bool
	for _, c := range rc.Configs {
		if c.Key == "log_retention_ms" {
			t.Errorf("kadm describe lists the weir name of a Kafka-named property: %+v", c)
		}
		if c.Key != "log.retention.ms" {
			continue
		}
		found = true
		if c.MaybeValue() != newRetention || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(c.Synonyms) != 2 ||
			c.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig || derefStr(c.Synonyms[1].Value) != defaultRetention {
			t.Errorf("kadm describe log.retention.ms: %+v", c)
		}
	}
	if !found {
		t.Errorf("kadm describe: no log.retention.ms in %d configs", len(rc.Configs))
	}

	// A topic created afterwards inherits it.
	const topic = "cluster-config-inherit"
	createTopicVia(t, bs[0], topic, 1)
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeTopic, topic, "retention.ms", newRetention, kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// Bad input is refused with INVALID_CONFIG naming the property.
	for _, tc := range []struct {
		name, value, want string
	}{
		{"no.such.config", "1", "no.such.config"},
		{"log_retention_ms", "soon", "log_retention_ms"},
		{"log.retention.ms", "-5", "log.retention.ms"},
	} {
		r := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: tc.name, Value: kadm.StringPtr(tc.value)})
		if !errors.Is(r.Err, kerr.InvalidConfig) || !strings.Contains(r.ErrMessage, tc.want) {
			t.Errorf("%s=%s: %v (%q), want INVALID_CONFIG naming %s", tc.name, tc.value, r.Err, r.ErrMessage, tc.want)
		} else {
			t.Logf("%s=%s refused: %s", tc.name, tc.value, r.ErrMessage)
		}
	}
	// A specific broker is refused: the properties are cluster-wide.
	resp, err := adm.AlterBrokerConfigs(ctxTimeout(t, requestTimeout), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log_retention_ms", Value: kadm.StringPtr("1000")}}, 1)
	if err != nil || len(resp) != 1 || !errors.Is(resp[0].Err, kerr.InvalidRequest) {
		t.Errorf("AlterBrokerConfigs on broker 1: %v %+v, want INVALID_REQUEST", err, resp)
	}
	waitConfigEverywhere(t, bs, broker, "", "log_retention_ms", newRetention, kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// The value survives a restart of the whole cluster.
	restartAll(t, bs)
	waitConfigEverywhere(t, bs, broker, "", "log_retention_ms", newRetention, kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeTopic, topic, "retention.ms", newRetention, kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// DELETE resets it to the default everywhere.
	adm = kadm.NewClient(directClient(t, bs[2]))
	if r := alter(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "log_retention_ms"}); r.Err != nil {
		t.Fatalf("delete log_retention_ms: %v (%s)", r.Err, r.ErrMessage)
	}
	waitConfigEverywhere(t, bs, broker, "", "log_retention_ms", defaultRetention, kmsg.ConfigSourceDefaultConfig)
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeTopic, topic, "retention.ms", defaultRetention, kmsg.ConfigSourceDefaultConfig)
}

// TestBrokerConfigsKafkaConfigsTool: Kafka's kafka-configs on the
// cluster-default broker entity adds, describes and deletes a property by
// its Kafka name, and --describe --all lists weir-only properties under
// their own names.
func TestBrokerConfigsKafkaConfigsTool(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 1)
	boot := strings.Join(kafkaAddrs(bs), ",")
	run := func(args ...string) string {
		t.Helper()
		out, err := kafkaTool(t, "kafka.admin.ConfigCommand", append([]string{"--bootstrap-server", boot, "--entity-type", "brokers", "--entity-default"}, args...)...)
		if err != nil {
			t.Fatalf("kafka-configs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	run("--alter", "--add-config", "num.partitions=3,log.retention.ms=7200000")
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeBroker, "", "default_topic_partitions", "3", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	if out := run("--describe"); !strings.Contains(out, "num.partitions=3") || !strings.Contains(out, "log.retention.ms=7200000") {
		t.Errorf("kafka-configs --describe after setting num.partitions and log.retention.ms:\n%s", out)
	}
	run("--alter", "--delete-config", "num.partitions")
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeBroker, "", "default_topic_partitions", "1", kmsg.ConfigSourceDefaultConfig)
	out := run("--describe", "--all")
	for _, want := range []string{"num.partitions=1", "log.retention.ms=7200000", "enable_rack_aware_follower_fetching=", "auto.leader.rebalance.enable=true"} {
		if !strings.Contains(out, want) {
			t.Errorf("kafka-configs --describe --all: no %q in\n%s", want, out)
		}
	}
}
