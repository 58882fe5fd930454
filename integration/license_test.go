//go:build weirtestlicense

package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/config"
)

const coalescingProperty = "kafka_fetch_read_coalescing_enabled"

// licenseDoc is the part of GET /v1/features/license the tests read.
type licenseDoc struct {
	Loaded    bool     `json:"loaded"`
	Status    string   `json:"status"`
	Valid     bool     `json:"valid"`
	Violation bool     `json:"violation"`
	InUse     []string `json:"features_in_use"`
	License   *struct {
		Org     string `json:"org"`
		Expires int64  `json:"expires"`
	} `json:"license"`
}

// waitLicenseEverywhere waits until every broker reports the status and
// violation wanted.
func waitLicenseEverywhere(t testing.TB, bs []*Broker, status string, violation bool) {
	t.Helper()
	for _, b := range bs {
		pollUntil(t, configPropagation, fmt.Sprintf("node %d: license %s, violation %v", b.NodeID, status, violation), func() error {
			var doc licenseDoc
			if code, raw := adminDo(t, b, "GET", "/v1/features/license", "", &doc); code != http.StatusOK {
				return fmt.Errorf("%d %s", code, raw)
			}
			if doc.Status != status || doc.Violation != violation {
				return fmt.Errorf("%+v", doc)
			}
			return nil
		})
	}
}

// waitLogged waits until every broker's log has at least n lines with all
// of parts.
func waitLogged(t testing.TB, bs []*Broker, n int, parts ...string) {
	t.Helper()
	for _, b := range bs {
		pollUntil(t, configPropagation, fmt.Sprintf("node %d logs %d× %q", b.NodeID, n, parts), func() error {
			data, err := os.ReadFile(b.LogPath())
			if err != nil {
				return err
			}
			got := 0
			for _, line := range strings.Split(string(data), "\n") {
				all := true
				for _, p := range parts {
					all = all && strings.Contains(line, p)
				}
				if all {
					got++
				}
			}
			if got < n {
				return fmt.Errorf("%d lines", got)
			}
			return nil
		})
	}
}

// TestLicenseGating drives the enterprise license of a 3-broker cluster
// through its life, with the brokers' clock moved through a file (test
// builds only) instead of waiting: the built-in trial lets coalescing be
// enabled; when the trial ends it quietly stops taking effect on every
// broker (the property keeps its value); enabling it is then refused on
// the Kafka protocol and the admin API naming the feature; tampered,
// foreign and expired licenses are refused; a valid test license brings
// the feature back everywhere without a restart and survives one; and its
// expiry turns the feature off again.
func TestLicenseGating(t *testing.T) {
	t.Parallel()
	clockFile := filepath.Join(t.TempDir(), "clock-offset")
	setClock := func(d time.Duration) {
		if err := os.WriteFile(clockFile, []byte(d.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setClock(0)
	bs := StartCluster(t, 3, WithEnv("WEIR_TEST_CLOCK_FILE="+clockFile))
	adm := kadm.NewClient(directClient(t, bs[1]))
	setCoalescing := func(value string) (msg string, err error) {
		t.Helper()
		resp, err := adm.AlterBrokerConfigs(ctxTimeout(t, requestTimeout), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: coalescingProperty, Value: kadm.StringPtr(value)}})
		if err != nil || len(resp) != 1 {
			t.Fatalf("AlterBrokerConfigs: %v %+v", err, resp)
		}
		return resp[0].ErrMessage, resp[0].Err
	}

	// A new cluster runs the built-in trial: the feature may be enabled.
	waitLicenseEverywhere(t, bs, config.LicenseStatusTrial, false)
	if msg, err := setCoalescing("true"); err != nil {
		t.Fatalf("enable during the trial: %v %s", err, msg)
	}
	waitLogged(t, bs, 1, "cluster property in effect", "name="+coalescingProperty, "value=true")

	// 31 days later the trial is over: the feature goes quietly off on
	// every broker, and its value stays.
	trialOver := config.BuiltinTrialPeriod + 24*time.Hour
	setClock(trialOver)
	waitLicenseEverywhere(t, bs, config.LicenseStatusNone, true)
	waitLogged(t, bs, 1, "cluster property in effect", "name="+coalescingProperty, "value=false")
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeBroker, "", coalescingProperty, "true", kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// Enabling it now is refused on every route, naming the feature.
	if _, err := setCoalescing("false"); err != nil {
		t.Fatalf("turning it off without a license: %v", err)
	}
	msg, err := setCoalescing("true")
	if !errors.Is(err, kerr.PolicyViolation) || !strings.Contains(msg, coalescingProperty) || !strings.Contains(msg, "no license") {
		t.Fatalf("Kafka AlterConfigs without a license: %v %q, want POLICY_VIOLATION naming the feature", err, msg)
	}
	t.Logf("refused on the Kafka protocol: %s", msg)
	code, raw := adminDo(t, bs[2], "PUT", "/v1/cluster_config", `{"upsert":{"`+coalescingProperty+`":true}}`, nil)
	if code != http.StatusBadRequest || !strings.Contains(raw, coalescingProperty) || !strings.Contains(raw, "enterprise feature") {
		t.Fatalf("admin PUT without a license: %d %s", code, raw)
	}

	// Bad licenses are refused.
	now := time.Now().Add(trialOver)
	good := config.SignTestLicense(config.License{Org: "Weir Test", Type: config.LicenseTypeEnterprise, Expiry: now.Add(60 * 24 * time.Hour).Truncate(time.Second)})
	_, foreignKey, _ := ed25519.GenerateKey(rand.Reader)
	foreign, err := config.SignLicense(foreignKey, config.License{Version: 1, Org: "Mallory", Type: config.LicenseTypeEnterprise, Expiry: now.Add(time.Hour).Truncate(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	payload, sig, _ := strings.Cut(good, ".")
	for name, text := range map[string]string{
		"tampered": strings.TrimRight(payload, "=") + "A." + sig,
		"foreign":  foreign,
		"expired":  config.SignTestLicense(config.License{Org: "Weir Test", Type: config.LicenseTypeEnterprise, Expiry: now.Add(-time.Hour).Truncate(time.Second)}),
	} {
		if code, raw := adminDo(t, bs[0], "PUT", "/v1/features/license", text, nil); code != http.StatusBadRequest {
			t.Errorf("%s license: %d %s, want 400", name, code, raw)
		} else {
			t.Logf("%s license refused: %s", name, strings.Join(strings.Fields(raw), " "))
		}
	}

	// weirctl refuses a tampered license with the broker's reason, and
	// sets a valid one from stdin; info then shows it.
	w := newWeirctl(t, bs[0])
	lic := []string{"cluster", "license", "--admin-url", "http://" + bs[0].AdminAddr}
	w.fails(t, "signature", append(lic, "set", strings.TrimRight(payload, "=")+"A."+sig)...)
	w.ok(t, good+"\n", append(lic, "set", "--file", "-")...)
	info := w.ok(t, "", append(lic, "info")...).stdout
	if !strings.Contains(info, "valid") || !strings.Contains(info, "Weir Test") {
		t.Fatalf("weirctl cluster license info:\n%s", info)
	}
	doc := decodeJSON[licenseDoc](t, w.ok(t, "", append(lic, "info", "--format", "json")...))
	if !doc.Loaded || doc.License == nil || doc.License.Org != "Weir Test" || doc.Status != config.LicenseStatusValid {
		t.Fatalf("weirctl cluster license info --format json: %+v", doc)
	}
	// Each broker judges by the license it has applied; the controller
	// log brings it to every broker within moments.
	waitLicenseEverywhere(t, bs, config.LicenseStatusValid, false)
	if msg, err := setCoalescing("true"); err != nil {
		t.Fatalf("enable with a license: %v %s", err, msg)
	}
	waitLogged(t, bs, 2, "cluster property in effect", "name="+coalescingProperty, "value=true")

	// A full restart keeps the license and the property.
	restartAll(t, bs)
	waitLicenseEverywhere(t, bs, config.LicenseStatusValid, false)
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeBroker, "", coalescingProperty, "true", kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// The license expires: the feature goes off again, quietly.
	setClock(trialOver + 61*24*time.Hour)
	waitLicenseEverywhere(t, bs, config.LicenseStatusExpired, true)
	waitLogged(t, bs, 1, "enterprise features are in use without a valid license")
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeBroker, "", coalescingProperty, "true", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
}
