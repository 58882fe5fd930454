package integration

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// TestAdminHTTP: readiness and Prometheus metrics on the admin listener.
func TestAdminHTTP(t *testing.T) {
	b := StartBroker(t)
	if code, _ := httpGet(t, "http://"+b.AdminAddr+"/v1/status/ready"); code != http.StatusOK {
		t.Errorf("GET /v1/status/ready: %d, want 200", code)
	}
	CreateTopic(t, b, "metrics", 1, nil)
	cl := b.Client(t)
	if err := cl.ProduceSync(ctxTimeout(t, requestTimeout), &kgo.Record{Topic: "metrics", Value: []byte("m")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	code, body := httpGet(t, "http://"+b.AdminAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d, want 200", code)
	}
	if !strings.Contains(body, "# TYPE ") {
		t.Errorf("GET /metrics: no Prometheus exposition (# TYPE lines) in %d bytes", len(body))
	}
	weirLines := 0
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "weir_") {
			weirLines++
		}
	}
	if weirLines == 0 {
		t.Errorf("GET /metrics: no weir_* samples after serving requests")
	}
	if code, _ := httpGet(t, "http://"+b.AdminAddr+"/v1/no-such-endpoint"); code != http.StatusNotFound {
		t.Errorf("GET /v1/no-such-endpoint: %d, want 404", code)
	}
}

// TestShutdownWithOpenConnections: SIGTERM while a fetch is parked in a
// long poll, a producer is connected and an idle connection is open still
// exits 0 within the stop timeout, and the parked fetch gets an answer or a
// closed connection (not a hang).
func TestShutdownWithOpenConnections(t *testing.T) {
	b := StartBroker(t)
	const topic = "shutdown"
	CreateTopic(t, b, topic, 1, nil)
	dialRaw(t, b.KafkaAddr) // an idle connection, closed at cleanup
	prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, prod, []*kgo.Record{{Topic: topic, Partition: 0, Value: []byte("x")}}, 15*time.Second)

	fc := dialRaw(t, b.KafkaAddr)
	req := buildFetch(11, fetchSpec{MaxWaitMs: 30000, MinBytes: 1, MaxBytes: 1 << 20, Parts: []fetchPart{{Topic: topic, Partition: 0, Offset: 1, MaxBytes: 1 << 20}}})
	fc.Send(req)
	time.Sleep(300 * time.Millisecond)

	start := time.Now()
	b.Stop(t) // asserts exit 0 within 15 s
	t.Logf("stopped in %v with a parked 30 s fetch", time.Since(start).Round(time.Millisecond))
	if _, err := fc.ReadFrame(5 * time.Second); err == nil {
		t.Logf("parked fetch was answered before shutdown")
	}
	b.Start(t)
	got := consumeN(t, b, 1, 20*time.Second, []string{topic})
	if string(got[0].Value) != "x" {
		t.Errorf("after restart: %q", got[0].Value)
	}
}

// lastSegmentFile returns the newest segment file of topic (partition 0)
// under dataDir (Kafka layout: <20-digit base offset>.log).
func lastSegmentFile(t *testing.T, dataDir, topic string) string {
	t.Helper()
	var logs []string
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".log") && len(d.Name()) == 24 && strings.Contains(path, string(filepath.Separator)+topic) {
			logs = append(logs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dataDir, err)
	}
	if len(logs) == 0 {
		t.Fatalf("no segment files for %s under %s", topic, dataDir)
	}
	sort.Strings(logs)
	return logs[len(logs)-1]
}

// TestTornTailRecovery simulates a torn write (what a power loss can leave):
// the last batch of the active segment is cut short while the broker is
// down. On start the broker drops the partial batch, keeps every whole one,
// and appends after it.
func TestTornTailRecovery(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	const topic, batches, per = "torn-tail", 10, 5
	CreateTopic(t, b, topic, 1, nil)
	rc := dialRaw(t, b.KafkaAddr)
	pv := produceVersion(t, vers)
	for i := range batches {
		var recs []rec
		for j := range per {
			recs = append(recs, rec{Value: fmt.Appendf(nil, "b%02d-r%d", i, j)})
		}
		if r := produceRaw(t, rc, pv, -1, topic, 0, buildBatch(batchOpts{}, recs)); r.ErrorCode != 0 || r.BaseOffset != int64(i*per) {
			t.Fatalf("batch %d: error %d offset %d", i, r.ErrorCode, r.BaseOffset)
		}
	}
	rc.Close()
	b.Stop(t)

	seg := lastSegmentFile(t, b.DataDir, topic)
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, st.Size()-7); err != nil {
		t.Fatal(err)
	}
	t.Logf("truncated %s from %d to %d bytes", seg, st.Size(), st.Size()-7)

	b.Start(t)
	const whole = (batches - 1) * per
	if hw := endOffsets(t, b.Admin(t), topic); hw[0] != whole {
		t.Errorf("HWM after recovering a torn last batch: %d, want %d", hw[0], whole)
	}
	got := consumeN(t, b, whole, 30*time.Second, []string{topic})
	for i, r := range got {
		if want := fmt.Sprintf("b%02d-r%d", i/per, i%per); r.Offset != int64(i) || string(r.Value) != want {
			t.Fatalf("record %d after recovery: offset %d value %q, want %q", i, r.Offset, r.Value, want)
		}
	}
	rc2 := dialRaw(t, b.KafkaAddr)
	r := produceRaw(t, rc2, pv, -1, topic, 0, buildBatch(batchOpts{}, []rec{{Value: []byte("after")}}))
	if r.ErrorCode != 0 || r.BaseOffset != whole {
		t.Errorf("produce after recovery: error %d offset %d, want 0 and %d", r.ErrorCode, r.BaseOffset, whole)
	}
	got = consumeN(t, b, whole+1, 30*time.Second, []string{topic})
	if last := got[len(got)-1]; string(last.Value) != "after" || last.Offset != whole {
		t.Errorf("last record: offset %d value %q, want %d \"after\"", last.Offset, last.Value, whole)
	}
}

// TestTopicIDs: topic IDs are stable across restarts, and a fetch with the
// ID of a deleted topic gets UNKNOWN_TOPIC_ID even after the name is reused.
func TestTopicIDs(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	requireVersion(t, vers, 1, 13)
	const topic = "ids"
	CreateTopic(t, b, topic, 1, nil)
	id1 := topicIDOf(t, b, topic)
	b.Restart(t)
	if id := topicIDOf(t, b, topic); id != id1 {
		t.Errorf("topic ID changed across restart: %x -> %x", id1, id)
	}
	adm := b.Admin(t)
	if resp, err := adm.DeleteTopics(ctxTimeout(t, requestTimeout), topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("DeleteTopics: %v %v", err, resp[topic].Err)
	}
	CreateTopic(t, b, topic, 1, nil)
	id2 := topicIDOf(t, b, topic)
	if id2 == id1 {
		t.Fatalf("recreated topic reuses the old ID %x", id1)
	}
	rc := dialRaw(t, b.KafkaAddr)
	resp := rc.Do(buildFetch(13, fetchSpec{MaxBytes: 1 << 20, Parts: []fetchPart{
		{TopicID: id1, Partition: 0, MaxBytes: 1 << 20},
		{TopicID: id2, Partition: 0, MaxBytes: 1 << 20},
	}})).(*kmsg.FetchResponse)
	got := flatten(13, resp)
	if len(got) != 2 {
		t.Fatalf("fetch by old and new ID: %d partitions", len(got))
	}
	if got[0].p.ErrorCode != errUnknownTopicID {
		t.Errorf("fetch with the deleted topic's ID: error %d, want %d (UNKNOWN_TOPIC_ID)", got[0].p.ErrorCode, errUnknownTopicID)
	}
	if got[1].p.ErrorCode != 0 {
		t.Errorf("fetch with the new topic's ID: error %d, want 0", got[1].p.ErrorCode)
	}
}

// TestDeleteTopicUnderLoad: deleting a topic while producers and consumers
// use it does not crash the broker; they get errors, and the broker keeps
// serving other topics.
func TestDeleteTopicUnderLoad(t *testing.T) {
	b := StartBroker(t)
	const topic = "doomed"
	CreateTopic(t, b, topic, 2, nil)
	CreateTopic(t, b, "survivor", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prod := b.Client(t, kgo.RecordDeliveryTimeout(3*time.Second))
	cons := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	done := make(chan struct{})
	stopLoad := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100000 && ctx.Err() == nil; i++ {
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
			prod.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)})
			pcancel()
			fctx, fcancel := context.WithTimeout(ctx, 50*time.Millisecond)
			cons.PollFetches(fctx)
			fcancel()
			select {
			case <-stopLoad:
				return
			default:
			}
		}
	}()
	time.Sleep(700 * time.Millisecond)
	if resp, err := b.Admin(t).DeleteTopics(ctxTimeout(t, requestTimeout), topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("DeleteTopics under load: %v %v", err, resp[topic].Err)
	}
	time.Sleep(700 * time.Millisecond)
	close(stopLoad)
	<-done
	if !b.Running() {
		t.Fatalf("weir exited after deleting a topic under load")
	}
	checkAlive(t, b, "survivor")
}
