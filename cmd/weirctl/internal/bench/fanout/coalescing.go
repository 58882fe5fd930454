package fanout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
)

// coalescingProperty is the cluster property that switches fetch read
// coalescing.
const coalescingProperty = "kafka_fetch_read_coalescing_enabled"

// configApplyPoll is how often the bench asks whether every broker has
// applied a config change.
const configApplyPoll = 100 * time.Millisecond

// coalescingSwitch sets kafka_fetch_read_coalescing_enabled for the runs
// and puts back what was there: the explicit value, or, when the
// property was at its default, no explicit value at all.
type coalescingSwitch struct {
	admin   *admin.Client
	timeout time.Duration

	effective bool
	explicit  bool
	original  any
	// changed is set once the bench has sent a change, after which
	// restore has something to undo.
	changed bool
}

// readCoalescing reads the property's effective value and whether it
// was set explicitly.
func readCoalescing(ctx context.Context, api *admin.Client, timeout time.Duration) (*coalescingSwitch, error) {
	var all, set map[string]any
	if err := api.Do(ctx, http.MethodGet, "/v1/cluster_config", nil, &all); err != nil {
		return nil, fmt.Errorf("reading %s: %w", coalescingProperty, err)
	}
	v, ok := all[coalescingProperty]
	if !ok {
		return nil, fmt.Errorf("the cluster has no property %s: its brokers predate fetch read coalescing", coalescingProperty)
	}
	effective, err := propertyBool(v)
	if err != nil {
		return nil, err
	}
	if err := api.Do(ctx, http.MethodGet, "/v1/cluster_config?include_defaults=false", nil, &set); err != nil {
		return nil, fmt.Errorf("reading %s: %w", coalescingProperty, err)
	}
	original, explicit := set[coalescingProperty]
	return &coalescingSwitch{admin: api, timeout: timeout, effective: effective, explicit: explicit, original: original}, nil
}

// propertyBool reads a boolean property as the admin API shows it: a
// JSON boolean, or its text form from older brokers.
func propertyBool(v any) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		if parsed, err := strconv.ParseBool(b); err == nil {
			return parsed, nil
		}
	}
	return false, fmt.Errorf("%s is %v, not a boolean", coalescingProperty, v)
}

func (s *coalescingSwitch) describeOriginal() string {
	if !s.explicit {
		return "back to its default"
	}
	return fmt.Sprintf("back to %v", s.original)
}

// set switches coalescing on or off and returns once every live broker
// has applied the change, so a run never starts half switched.
func (s *coalescingSwitch) set(ctx context.Context, on bool) error {
	s.changed = true
	return s.put(ctx, map[string]any{coalescingProperty: on}, []string{}, fmt.Sprintf("setting %s=%t", coalescingProperty, on))
}

// restore puts the property back as it was before the bench, if the
// bench changed it.
func (s *coalescingSwitch) restore(ctx context.Context) error {
	if !s.changed {
		return nil
	}
	if s.explicit {
		return s.put(ctx, map[string]any{coalescingProperty: s.original}, []string{}, "restoring "+coalescingProperty)
	}
	return s.put(ctx, map[string]any{}, []string{coalescingProperty}, "restoring "+coalescingProperty+" to its default")
}

func (s *coalescingSwitch) put(ctx context.Context, upsert map[string]any, remove []string, what string) error {
	var res struct {
		ConfigVersion int64 `json:"config_version"`
	}
	body := map[string]any{"upsert": upsert, "remove": remove}
	if err := s.admin.Do(ctx, http.MethodPut, "/v1/cluster_config", body, &res); err != nil {
		// A refusal (an enterprise feature without a license, say)
		// names its reason per property; show it, not just the name.
		var ae *admin.Error
		if errors.As(err, &ae) && ae.Problems[coalescingProperty] != "" {
			return fmt.Errorf("%s: %s: %w", what, ae.Problems[coalescingProperty], err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := waitConfigApplied(ctx, s.admin, res.ConfigVersion, s.timeout); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// waitConfigApplied polls GET /v1/cluster_config/status until every live
// broker reports config version version or later, for at most timeout.
func waitConfigApplied(ctx context.Context, api *admin.Client, version int64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(configApplyPoll)
	defer tick.Stop()
	// The last answer's laggards explain a timeout better than the
	// error of a poll that the deadline cut short.
	var lagging []string
	var pollErr error
	for {
		var st []admin.ConfigStatus
		if pollErr = api.Do(ctx, http.MethodGet, "/v1/cluster_config/status", nil, &st); pollErr == nil {
			if lagging = laggingBrokers(st, version); len(lagging) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if len(lagging) > 0 {
				return fmt.Errorf("not every broker applied config version %d within %s: %s", version, timeout, strings.Join(lagging, "; "))
			}
			return fmt.Errorf("waiting for every broker to apply config version %d: %w", version, pollErr)
		case <-tick.C:
		}
	}
}

// laggingBrokers describes the brokers that have not applied version.
func laggingBrokers(st []admin.ConfigStatus, version int64) []string {
	var out []string
	for _, s := range st {
		switch {
		case s.Error != "":
			out = append(out, fmt.Sprintf("broker %d: %s", s.NodeID, s.Error))
		case s.ConfigVersion < version:
			out = append(out, fmt.Sprintf("broker %d is at version %d", s.NodeID, s.ConfigVersion))
		}
	}
	return out
}
