package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// adminDo sends one admin API request and decodes the JSON answer into out.
func adminDo(t testing.TB, b *Broker, method, path, body string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+b.AdminAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Timeout: requestTimeout}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s on node %d: %v", method, path, b.NodeID, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}
