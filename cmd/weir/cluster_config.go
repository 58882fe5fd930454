package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/config"
)

// maxClusterConfigBody bounds a PUT /v1/cluster_config body.
const maxClusterConfigBody = 1 << 20

// clusterConfigBackend is what the cluster config endpoints need of the
// broker; tests substitute a fake.
type clusterConfigBackend interface {
	Properties() *config.Values
	AlterClusterProperties(changes []broker.PropertyChange, validateOnly bool) error
	ClusterConfigVersion() int64
	ClusterConfigStatus(ctx context.Context) []broker.ConfigStatus
	CheckEnterprise(name, value string) error
}

// registerClusterConfig adds Redpanda-shaped cluster config endpoints:
//
//	GET /v1/cluster_config[?include_defaults=false]  property → effective value
//	PUT /v1/cluster_config {"upsert":{...},"remove":[...]} → {"config_version":N}
//	GET /v1/cluster_config/schema                    every property's type, default, bounds
//	GET /v1/cluster_config/status                    one entry per live broker
//
// Other methods answer 405; every error is a JSON object.
func registerClusterConfig(mux *http.ServeMux, b clusterConfigBackend) {
	mux.HandleFunc("/v1/cluster_config", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			getClusterConfig(w, r, b)
		case http.MethodPut:
			putClusterConfig(w, r, b)
		default:
			methodNotAllowed(w, "GET, PUT")
		}
	})
	mux.HandleFunc("/v1/cluster_config/schema", getOnly(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, clusterConfigSchema(b.Properties().Registry()))
	}))
	mux.HandleFunc("/v1/cluster_config/status", getOnly(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		writeJSON(w, http.StatusOK, b.ClusterConfigStatus(ctx))
	}))
}

// getOnly answers other methods than GET and HEAD with 405.
func getOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET")
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"message":"encoding the response failed"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"message": fmt.Sprintf(format, args...)})
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method not allowed; allowed: %s", allow)
}

// typedValue turns a property's text form into its JSON value: a boolean,
// a number or a string.
func typedValue(p *config.Property, s string) any {
	switch p.Kind {
	case config.KindBool:
		if v, err := strconv.ParseBool(s); err == nil {
			return v
		}
	case config.KindInt:
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v
		}
	}
	return s
}

func getClusterConfig(w http.ResponseWriter, r *http.Request, b clusterConfigBackend) {
	includeDefaults := true
	if s := r.URL.Query().Get("include_defaults"); s != "" {
		v, err := strconv.ParseBool(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, "include_defaults: %q is not a boolean", s)
			return
		}
		includeDefaults = v
	}
	vals := b.Properties()
	reg := vals.Registry()
	out := map[string]any{}
	for _, name := range reg.Names() {
		p, _ := reg.Lookup(name)
		v, explicit := vals.Get(name)
		if explicit || includeDefaults {
			out[name] = typedValue(p, v)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// clusterConfigPatch is the body of PUT /v1/cluster_config.
type clusterConfigPatch struct {
	Upsert map[string]json.RawMessage `json:"upsert"`
	Remove []string                   `json:"remove"`
}

func putClusterConfig(w http.ResponseWriter, r *http.Request, b clusterConfigBackend) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxClusterConfigBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body larger than %d bytes", maxClusterConfigBody)
			return
		}
		writeError(w, http.StatusBadRequest, "reading body: %v", err)
		return
	}
	var patch clusterConfigPatch
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&patch); err != nil {
		writeError(w, http.StatusBadRequest, "body: %v", err)
		return
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "body: more than one JSON value")
		return
	}
	changes, errs := validatePatch(b.Properties().Registry(), patch, b.CheckEnterprise)
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, errs)
		return
	}
	if err := b.AlterClusterProperties(changes, false); err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) && ke != kerr.RequestTimedOut && ke != kerr.NotController {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"config_version": b.ClusterConfigVersion()})
}

// licenseMessage is a license refusal without the Kafka error code's
// generic text.
func licenseMessage(err error) string {
	var lr *config.LicenseRequiredError
	if errors.As(err, &lr) {
		return lr.Error()
	}
	return err.Error()
}

// validatePatch checks every upsert (including the enterprise license
// check) and removal and returns either the changes (values in their
// normalised text form) or every problem found, property name → message.
func validatePatch(reg *config.Registry, patch clusterConfigPatch, checkEnterprise func(name, value string) error) ([]broker.PropertyChange, map[string]string) {
	errs := map[string]string{}
	var changes []broker.PropertyChange
	for _, name := range sortedKeys(patch.Upsert) {
		p, ok := reg.Lookup(name)
		if !ok {
			errs[name] = "unknown property"
			continue
		}
		value, err := textValue(p, patch.Upsert[name])
		if err == nil {
			err = p.Validate(value)
		}
		if err != nil {
			errs[name] = err.Error()
			continue
		}
		value = normalise(p, value)
		if err := checkEnterprise(name, value); err != nil {
			errs[name] = licenseMessage(err)
			continue
		}
		changes = append(changes, broker.PropertyChange{Name: name, Value: value})
	}
	seen := map[string]bool{}
	for _, name := range patch.Remove {
		switch _, ok := reg.Lookup(name); {
		case !ok:
			errs[name] = "unknown property"
		case patch.Upsert[name] != nil:
			errs[name] = "both upserted and removed"
		case seen[name]:
			errs[name] = "removed twice"
		default:
			changes = append(changes, broker.PropertyChange{Name: name, Remove: true})
		}
		seen[name] = true
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return changes, nil
}

// textValue converts a JSON value to the property's text form: booleans
// for boolean properties, integers for integer ones, and strings for any
// property (validated afterwards).
func textValue(p *config.Property, raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		if p.Kind == config.KindBool {
			return strconv.FormatBool(v), nil
		}
	case json.Number:
		if p.Kind == config.KindInt {
			return v.String(), nil
		}
	}
	return "", fmt.Errorf("%s: %s is not a %s", p.Name, raw, p.Kind)
}

// normalise writes a valid value the way GET shows it ("1" → "true",
// "007" → "7").
func normalise(p *config.Property, s string) string {
	switch p.Kind {
	case config.KindBool:
		v, _ := strconv.ParseBool(s)
		return strconv.FormatBool(v)
	case config.KindInt:
		v, _ := strconv.ParseInt(s, 10, 64)
		return strconv.FormatInt(v, 10)
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// propertySchema is one property in GET /v1/cluster_config/schema.
type propertySchema struct {
	Type         string   `json:"type"`
	Default      any      `json:"default"`
	Description  string   `json:"description"`
	Enterprise   bool     `json:"enterprise"`
	NeedsRestart bool     `json:"needs_restart"`
	Minimum      *int64   `json:"minimum,omitempty"`
	Maximum      *int64   `json:"maximum,omitempty"`
	Enum         []string `json:"enum,omitempty"`
}

func clusterConfigSchema(reg *config.Registry) map[string]map[string]propertySchema {
	props := map[string]propertySchema{}
	for _, name := range reg.Names() {
		p, _ := reg.Lookup(name)
		s := propertySchema{Type: p.Kind.String(), Default: typedValue(p, p.Default), Description: p.Description,
			Enterprise: p.Enterprise, NeedsRestart: p.NeedsRestart, Enum: p.OneOf}
		if p.Kind == config.KindInt && p.Min <= p.Max {
			lo, hi := p.Min, p.Max
			s.Minimum, s.Maximum = &lo, &hi
		}
		props[name] = s
	}
	return map[string]map[string]propertySchema{"properties": props}
}
