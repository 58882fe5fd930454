package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Kafka Connect 4.x, the real distributed worker (ConnectDistributed) with
// Kafka's FileStream connectors, against a three-broker weir cluster.

const (
	connectGroup          = "weir-connect"
	connectConfigTopic    = "weir-connect-configs"
	connectOffsetTopic    = "weir-connect-offsets"
	connectStatusTopic    = "weir-connect-status"
	connectLinesTopic     = "connect-lines"
	connectSourceName     = "file-source"
	connectSinkName       = "file-sink"
	connectSinkGroup      = "connect-" + connectSinkName // Connect's group for a sink connector
	connectReadyTimeout   = 90 * time.Second             // JVM start, worker joining its group
	connectCopyTimeout    = 90 * time.Second
	connectStopTimeout    = 60 * time.Second // SIGTERM to exit; SIGKILL after
	connectRequestTimeout = 15 * time.Second
)

// connectWorker is a Connect worker's configuration; start runs it.
type connectWorker struct {
	java, jars, dir string
	propsFile       string // worker.properties
	log4jFlag       string // -Dlog4j2.configurationFile=...
	rest            string // http://host:port of its REST API
}

// newConnectWorker writes the worker properties for a distributed worker
// on bs with its REST API on a free loopback port. The worker creates its
// config, offset and status topics itself (replicated on all three
// brokers, compacted: Connect refuses other cleanup policies for them).
func newConnectWorker(t *testing.T, java, jars string, bs []*Broker) *connectWorker {
	t.Helper()
	dir := t.TempDir()
	restAddr := freeLoopbackAddrs(t, 1)[0]
	host, port, _ := strings.Cut(restAddr, ":")
	props := strings.Join([]string{
		"bootstrap.servers=" + strings.Join(kafkaAddrs(bs), ","),
		"group.id=" + connectGroup,
		"config.storage.topic=" + connectConfigTopic,
		"offset.storage.topic=" + connectOffsetTopic,
		"status.storage.topic=" + connectStatusTopic,
		"config.storage.replication.factor=3",
		"offset.storage.replication.factor=3",
		"status.storage.replication.factor=3",
		// Kafka's config/connect-distributed.properties: JSON with
		// schemas, through connect-json.
		"key.converter=org.apache.kafka.connect.json.JsonConverter",
		"value.converter=org.apache.kafka.connect.json.JsonConverter",
		// Source offsets and sink offsets are committed every second
		// (default a minute), so the copy's progress is durable quickly;
		// a clean stop commits them anyway.
		"offset.flush.interval.ms=1000",
		"listeners=http://" + restAddr,
		"rest.advertised.host.name=" + host,
		"rest.advertised.port=" + port,
	}, "\n") + "\n"
	w := &connectWorker{java: java, jars: jars, dir: dir, rest: "http://" + restAddr}
	w.propsFile = filepath.Join(dir, "worker.properties")
	if err := os.WriteFile(w.propsFile, []byte(props), 0o644); err != nil {
		t.Fatalf("writing %s: %v", w.propsFile, err)
	}
	w.log4jFlag = writeLog4jConfig(t, dir)
	return w
}

// start runs the worker and waits until its REST API reports it healthy
// (it has joined its group and read its config topic).
func (w *connectWorker) start(t *testing.T) *jvmProcess {
	t.Helper()
	start := time.Now()
	p := startJVM(t, "Connect worker", w.java, filepath.Join(w.dir, "worker.log"),
		"-Xmx512m", w.log4jFlag, "-cp", frameworkClasspath(w.jars),
		"org.apache.kafka.connect.cli.ConnectDistributed", w.propsFile)
	pollUntil(t, connectReadyTimeout, "Connect worker healthy (GET /health)", func() error {
		if p.exited() {
			t.Fatalf("Connect worker exited (%s) while starting; output:\n%s", p.cmd.ProcessState, p.tail(logTailBytes))
		}
		status, body, err := w.request("GET", "/health", nil)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("GET /health: %d %s", status, body)
		}
		return nil
	})
	t.Logf("Connect worker healthy %v after its start", time.Since(start).Round(time.Millisecond))
	return p
}

// request sends one request to the worker's REST API.
func (w *connectWorker) request(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, w.rest+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// putConnector creates connector name with config through the REST API.
// A worker answers 409 while its group rebalances, so that is retried.
func (w *connectWorker) putConnector(t *testing.T, name string, config map[string]string) {
	t.Helper()
	pollUntil(t, connectReadyTimeout, "PUT /connectors/"+name+"/config", func() error {
		status, body, err := w.request("PUT", "/connectors/"+name+"/config", config)
		switch {
		case err != nil:
			return err
		case status == http.StatusCreated || status == http.StatusOK:
			return nil
		case status == http.StatusConflict || status >= 500:
			return fmt.Errorf("status %d: %s", status, body)
		}
		t.Fatalf("PUT /connectors/%s/config: status %d: %s", name, status, body)
		return nil
	})
}

// waitConnectorRunning waits until connector name and each of its tasks
// (there must be one) are RUNNING; a FAILED one fails the test.
func (w *connectWorker) waitConnectorRunning(t *testing.T, name string) {
	t.Helper()
	pollUntil(t, connectReadyTimeout, "connector "+name+" and its task RUNNING", func() error {
		status, body, err := w.request("GET", "/connectors/"+name+"/status", nil)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("GET /connectors/%s/status: %d %s", name, status, body)
		}
		var st struct {
			Connector struct{ State, Trace string }
			Tasks     []struct {
				ID           int
				State, Trace string
			}
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return fmt.Errorf("status %s: %v", body, err)
		}
		if st.Connector.State == "FAILED" {
			t.Fatalf("connector %s FAILED: %s", name, st.Connector.Trace)
		}
		for _, task := range st.Tasks {
			if task.State == "FAILED" {
				t.Fatalf("connector %s task %d FAILED: %s", name, task.ID, task.Trace)
			}
		}
		if st.Connector.State != "RUNNING" || len(st.Tasks) != 1 || st.Tasks[0].State != "RUNNING" {
			return fmt.Errorf("status %s", body)
		}
		return nil
	})
}

// appendLines appends lines first..last, of different lengths, to the
// source file. Each ends in a newline: the source connector emits only
// complete lines. They are ASCII: FileStreamSourceTask stores its position
// as a count of characters but skips that many bytes when it resumes, so
// multi-byte UTF-8 text is re-read from the wrong place after a restart
// (a limitation of the example connector, whatever the broker).
func appendLines(t *testing.T, path string, first, last int) {
	t.Helper()
	var b strings.Builder
	for i := first; i <= last; i++ {
		fmt.Fprintf(&b, "%05d %s\n", i, strings.Repeat("weir ", i%7))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		t.Fatalf("appending to %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("closing %s: %v", path, err)
	}
}

// waitFileCopy waits until the sink file is at least as long as the source
// file, then checks, once right away and once a moment later (a line
// copied twice would make it longer), that the two are equal.
func waitFileCopy(t *testing.T, source, sink string) {
	t.Helper()
	want, err := os.ReadFile(source)
	if err != nil {
		t.Fatalf("reading %s: %v", source, err)
	}
	var got []byte
	pollUntil(t, connectCopyTimeout, "the sink file as long as the source", func() error {
		got, err = os.ReadFile(sink)
		if err != nil && !os.IsNotExist(err) {
			t.Fatalf("reading %s: %v", sink, err)
		}
		if len(got) < len(want) {
			return fmt.Errorf("%d of %d bytes (%d of %d lines) copied", len(got), len(want), bytes.Count(got, []byte("\n")), bytes.Count(want, []byte("\n")))
		}
		return nil
	})
	compareFiles(t, want, got)
	time.Sleep(2 * time.Second)
	if got, err = os.ReadFile(sink); err != nil {
		t.Fatalf("reading %s: %v", sink, err)
	}
	compareFiles(t, want, got)
}

// compareFiles fails the test unless got equals want, naming the first
// line where they differ.
func compareFiles(t *testing.T, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g || i >= len(wl) || i >= len(gl) {
			t.Fatalf("sink file differs from the source: %d lines vs %d; first difference at line %d: %q, want %q", len(gl)-1, len(wl)-1, i+1, g, w)
		}
	}
}

// TestConnectDistributedFileStream runs Kafka Connect's distributed worker
// against three weir brokers: it creates its compacted internal topics,
// a FileStreamSource connector copies a file into a topic (which the
// worker creates) and a FileStreamSink connector copies the topic into
// another file, exactly. Then the worker is stopped, lines are appended to
// the source, and a new worker resumes both connectors from the offsets
// stored in weir: the sink ends up equal to the source, nothing copied
// twice.
func TestConnectDistributedFileStream(t *testing.T) {
	t.Parallel()
	java, jars := kafkaFrameworkJars.get(t) // skips without java or mvn
	bs := startReplCluster(t, 3, WithSet("cluster.group_initial_rebalance_delay_ms", "0"))
	w := newConnectWorker(t, java, jars, bs)
	adm := kadmClient(t, bs)

	const firstLines, moreLines = 3000, 1500
	source, sink := filepath.Join(w.dir, "source.txt"), filepath.Join(w.dir, "sink.txt")
	appendLines(t, source, 1, firstLines)

	worker := w.start(t)
	checkConnectClusterID(t, w, bs[0])
	for _, topic := range []string{connectConfigTopic, connectOffsetTopic, connectStatusTopic} {
		partitions := 0
		if topic == connectConfigTopic {
			partitions = 1 // Connect requires exactly one
		}
		checkFrameworkTopic(t, adm, topic, partitions, 3, "compact")
	}

	w.putConnector(t, connectSourceName, map[string]string{
		"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
		"tasks.max":       "1",
		"file":            source,
		"topic":           connectLinesTopic,
		// The worker creates the topic: one partition keeps the
		// lines in order for the sink.
		"topic.creation.default.partitions":         "1",
		"topic.creation.default.replication.factor": "3",
	})
	w.putConnector(t, connectSinkName, map[string]string{
		"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
		"tasks.max":       "1",
		"file":            sink,
		"topics":          connectLinesTopic,
	})
	w.waitConnectorRunning(t, connectSourceName)
	w.waitConnectorRunning(t, connectSinkName)
	waitFileCopy(t, source, sink)
	checkFrameworkTopic(t, adm, connectLinesTopic, 1, 3, "delete")
	t.Logf("%d lines copied through %s", firstLines, connectLinesTopic)

	stopStart := time.Now()
	if !worker.stop(t, connectStopTimeout) {
		t.Fatalf("the Connect worker did not stop within %v of SIGTERM", connectStopTimeout)
	}
	t.Logf("Connect worker stopped %v after SIGTERM", time.Since(stopStart).Round(time.Millisecond))

	appendLines(t, source, firstLines+1, firstLines+moreLines)
	w.start(t)
	// The connectors come back from the config topic, not from the test.
	w.waitConnectorRunning(t, connectSourceName)
	w.waitConnectorRunning(t, connectSinkName)
	waitFileCopy(t, source, sink)

	// The source task resumed from its stored position: every line is in
	// the topic once. The sink's group committed all of them.
	if got := endOffsets(t, adm, connectLinesTopic); len(got) != 1 || got[0] != firstLines+moreLines {
		t.Errorf("%s end offsets %v, want partition 0 at %d (one record per line)", connectLinesTopic, got, firstLines+moreLines)
	}
	pollUntil(t, 30*time.Second, "group "+connectSinkGroup+" committing every line", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		offsets, err := adm.FetchOffsets(ctx, connectSinkGroup)
		if err != nil {
			return err
		}
		o, ok := offsets.Lookup(connectLinesTopic, 0)
		if !ok || o.Err != nil || o.At != firstLines+moreLines {
			return fmt.Errorf("committed %+v (found %v), want offset %d", o, ok, firstLines+moreLines)
		}
		return nil
	})
}

// checkConnectClusterID checks the worker reports weir's cluster ID.
func checkConnectClusterID(t *testing.T, w *connectWorker, b *Broker) {
	t.Helper()
	status, body, err := w.request("GET", "/", nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /: %d %s %v", status, body, err)
	}
	var info struct {
		Version        string
		KafkaClusterID string `json:"kafka_cluster_id"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatalf("GET /: %s: %v", body, err)
	}
	md, err := askMetadata(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := derefStr(md.ClusterID); info.KafkaClusterID != want || want == "" {
		t.Errorf("Connect worker reports Kafka cluster ID %q, weir's is %q", info.KafkaClusterID, want)
	}
	t.Logf("Connect %s, Kafka cluster ID %s", info.Version, info.KafkaClusterID)
}
