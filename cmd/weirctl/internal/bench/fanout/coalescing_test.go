package fanout

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

// fakeConfigAdmin is the cluster config part of an admin API. Brokers
// apply a change only after statusLag more status polls, as a real
// cluster applies it a little later than the PUT answers.
type fakeConfigAdmin struct {
	srv *httptest.Server

	mu        sync.Mutex
	explicit  map[string]any
	version   int64
	applied   int64
	statusLag int
	polls     int
	puts      []map[string]any
	refuse    string // a problem for the coalescing property, if set
}

func newFakeConfigAdmin(t *testing.T, explicit map[string]any, statusLag int) *fakeConfigAdmin {
	t.Helper()
	fa := &fakeConfigAdmin{explicit: explicit, version: 3, applied: 3, statusLag: statusLag}
	fa.srv = httptest.NewServer(http.HandlerFunc(fa.serve))
	t.Cleanup(fa.srv.Close)
	return fa
}

func (fa *fakeConfigAdmin) serve(w http.ResponseWriter, r *http.Request) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/cluster_config":
		out := map[string]any{}
		if r.URL.Query().Get("include_defaults") != "false" {
			out[coalescingProperty] = false
			out["log_retention_ms"] = 1000
		}
		for k, v := range fa.explicit {
			out[k] = v
		}
		json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodPut && r.URL.Path == "/v1/cluster_config":
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(data, &body)
		fa.puts = append(fa.puts, body)
		if fa.refuse != "" {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{coalescingProperty: fa.refuse})
			return
		}
		for k, v := range body["upsert"].(map[string]any) {
			fa.explicit[k] = v
		}
		for _, k := range body["remove"].([]any) {
			delete(fa.explicit, k.(string))
		}
		fa.version++
		fa.polls = 0
		json.NewEncoder(w).Encode(map[string]int64{"config_version": fa.version})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/cluster_config/status":
		fa.polls++
		if fa.polls > fa.statusLag {
			fa.applied = fa.version
		}
		json.NewEncoder(w).Encode([]admin.ConfigStatus{
			{NodeID: 0, ConfigVersion: fa.version},
			{NodeID: 1, ConfigVersion: fa.applied},
		})
	case r.URL.Path == "/v1/brokers":
		json.NewEncoder(w).Encode([]admin.Broker{})
	default:
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"message":"not found"}`))
	}
}

func (fa *fakeConfigAdmin) client() *admin.Client {
	return admin.NewClient(fa.srv.URL, 5*time.Second)
}

func (fa *fakeConfigAdmin) snapshot() (explicit map[string]any, puts []map[string]any, polls int) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	explicit = map[string]any{}
	for k, v := range fa.explicit {
		explicit[k] = v
	}
	return explicit, append([]map[string]any(nil), fa.puts...), fa.polls
}

func TestCoalescingSwitchRestoresDefault(t *testing.T) {
	fa := newFakeConfigAdmin(t, map[string]any{}, 2)
	ctx := context.Background()
	sw, err := readCoalescing(ctx, fa.client(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if sw.effective || sw.explicit {
		t.Fatalf("read: %+v", sw)
	}
	if err := sw.set(ctx, true); err != nil {
		t.Fatal(err)
	}
	explicit, puts, polls := fa.snapshot()
	if explicit[coalescingProperty] != true || len(puts) != 1 {
		t.Fatalf("after set: %v %v", explicit, puts)
	}
	if polls <= 2 {
		t.Errorf("set returned before every broker applied the change (%d status polls)", polls)
	}
	if err := sw.set(ctx, false); err != nil {
		t.Fatal(err)
	}
	// The property was at its default: restoring removes it rather than
	// pinning the default explicitly.
	if err := sw.restore(ctx); err != nil {
		t.Fatal(err)
	}
	explicit, puts, _ = fa.snapshot()
	if _, set := explicit[coalescingProperty]; set || len(puts) != 3 {
		t.Fatalf("after restore: %v %v", explicit, puts)
	}
	if rm := puts[2]["remove"].([]any); len(rm) != 1 || rm[0] != coalescingProperty {
		t.Errorf("restore PUT: %v", puts[2])
	}
}

func TestCoalescingSwitchRestoresExplicitValue(t *testing.T) {
	fa := newFakeConfigAdmin(t, map[string]any{coalescingProperty: "true"}, 0)
	ctx := context.Background()
	sw, err := readCoalescing(ctx, fa.client(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !sw.effective || !sw.explicit {
		t.Fatalf("read: %+v", sw)
	}
	// Nothing changed yet: nothing to restore.
	if err := sw.restore(ctx); err != nil {
		t.Fatal(err)
	}
	if _, puts, _ := fa.snapshot(); len(puts) != 0 {
		t.Fatalf("restore without a change sent %v", puts)
	}
	if err := sw.set(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := sw.restore(ctx); err != nil {
		t.Fatal(err)
	}
	explicit, puts, _ := fa.snapshot()
	if explicit[coalescingProperty] != "true" || len(puts) != 2 {
		t.Fatalf("after restore: %v %v", explicit, puts)
	}
}

func TestCoalescingSwitchErrors(t *testing.T) {
	ctx := context.Background()
	fa := newFakeConfigAdmin(t, map[string]any{}, 0)
	fa.refuse = "kafka_fetch_read_coalescing_enabled is an enterprise feature: no valid license"
	sw, err := readCoalescing(ctx, fa.client(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clitest.WantErrContains(t, sw.set(ctx, true), "enterprise feature: no valid license")

	// A broker that never applies the change fails the set in time,
	// naming the broker.
	slow := newFakeConfigAdmin(t, map[string]any{}, 1<<30)
	sw, _ = readCoalescing(ctx, slow.client(), 300*time.Millisecond)
	start := time.Now()
	err = sw.set(ctx, true)
	clitest.WantErrContains(t, err, "broker 1 is at version 3")
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("set waited %s", el)
	}

	// A cluster that predates the property.
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"log_retention_ms": 5}`))
	}))
	defer old.Close()
	_, err = readCoalescing(ctx, admin.NewClient(old.URL, 0), time.Second)
	clitest.WantErrContains(t, err, "predate fetch read coalescing")
}

func TestLaggingBrokers(t *testing.T) {
	got := laggingBrokers([]admin.ConfigStatus{
		{NodeID: 0, ConfigVersion: 9},
		{NodeID: 1, ConfigVersion: 8},
		{NodeID: 2, Error: "deadline exceeded"},
	}, 9)
	if strings.Join(got, "; ") != "broker 1 is at version 8; broker 2: deadline exceeded" {
		t.Errorf("got %q", got)
	}
}

func TestBenchFanoutDoesNotTouchConfigWhenKafkaIsDown(t *testing.T) {
	// The property is read first, but set only right before a run; a
	// bench that fails before any run must leave the cluster alone.
	fa := newFakeConfigAdmin(t, map[string]any{}, 0)
	start := time.Now()
	_, _, err := benchtest.Run(t, NewCommand, "", "--brokers", "127.0.0.1:1", "--timeout", "500ms",
		"bench", "fanout", "t", "--admin-url", fa.srv.URL, "--coalescing", "both")
	if err == nil {
		t.Fatal("want an error against a dead Kafka listener")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s", el)
	}
	if _, puts, _ := fa.snapshot(); len(puts) != 0 {
		t.Errorf("config changed: %v", puts)
	}
}
