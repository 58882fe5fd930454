package broker

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// serviceConfigStatus asks a broker for its ConfigStatus over the cluster
// RPC mux.
const serviceConfigStatus = "cluster.config_status"

// ConfigStatus is one broker's view of the cluster properties, shaped like
// an entry of Redpanda's /v1/cluster_config/status.
type ConfigStatus struct {
	NodeID int32 `json:"node_id"`
	// ConfigVersion is the controller's config version as applied on
	// that broker.
	ConfigVersion int64 `json:"config_version"`
	// Restart: a property that is read only at start (NeedsRestart) has
	// changed since that broker's process started.
	Restart bool `json:"restart"`
	// Invalid and Unknown name properties in the controller's state that
	// this broker's registry rejects or does not know.
	Invalid []string `json:"invalid"`
	Unknown []string `json:"unknown"`
	// Error is set when the broker could not be asked; the other fields
	// are then zero.
	Error string `json:"error,omitempty"`
}

// recordStartProperties remembers the values of the properties that need
// a restart, as this process uses them.
func (b *Broker) recordStartProperties() {
	m := map[string]string{}
	reg := b.props.Registry()
	for _, name := range reg.Names() {
		if p, _ := reg.Lookup(name); p.NeedsRestart {
			m[name], _ = b.props.Get(name)
		}
	}
	b.startProps.Store(&m)
}

// LocalConfigStatus reports this broker's config status.
func (b *Broker) LocalConfigStatus() ConfigStatus {
	v := b.ctrl.state.View()
	st := ConfigStatus{NodeID: b.node.NodeID, ConfigVersion: v.ConfigVersion(), Invalid: []string{}, Unknown: []string{}}
	reg := b.props.Registry()
	for name, pv := range v.Properties() {
		p, ok := reg.Lookup(name)
		switch {
		case !ok:
			st.Unknown = append(st.Unknown, name)
		case p.Validate(pv.Value) != nil:
			st.Invalid = append(st.Invalid, name)
		}
	}
	slices.Sort(st.Unknown)
	slices.Sort(st.Invalid)
	if start := b.startProps.Load(); start != nil {
		for name, was := range *start {
			if now, _ := b.props.Get(name); now != was {
				st.Restart = true
			}
		}
	}
	return st
}

func (b *Broker) serveConfigStatus(context.Context, string, []byte) ([]byte, error) {
	return json.Marshal(b.LocalConfigStatus())
}

// ClusterConfigStatus asks every live broker for its config status (this
// one answers locally), in node id order. A broker that cannot be asked
// within the context's deadline (or 5s) gets an entry with Error set.
func (b *Broker) ClusterConfigStatus(ctx context.Context) []ConfigStatus {
	regs := b.ctrl.state.View().LiveBrokers(time.Now())
	out := make([]ConfigStatus, len(regs))
	var wg sync.WaitGroup
	for i, r := range regs {
		if r.NodeID == b.node.NodeID {
			out[i] = b.LocalConfigStatus()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st := ConfigStatus{NodeID: r.NodeID, Invalid: []string{}, Unknown: []string{}}
			reply, err := b.ctrl.mux.Call(cctx, r.RPCAddr, serviceConfigStatus, nil)
			if err == nil {
				err = json.Unmarshal(reply, &st)
			}
			if err != nil {
				st = ConfigStatus{NodeID: r.NodeID, Invalid: []string{}, Unknown: []string{}, Error: err.Error()}
			}
			out[i] = st
		}()
	}
	wg.Wait()
	slices.SortFunc(out, func(a, c ConfigStatus) int { return int(a.NodeID) - int(c.NodeID) })
	return out
}
