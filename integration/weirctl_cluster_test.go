package integration

import "testing"

// TestWeirctlCluster: cluster info and health against a single broker,
// whose one node is controller and leader of every partition.
func TestWeirctlCluster(t *testing.T) {
	b := StartBroker(t)
	CreateTopic(t, b, "info", 3, nil)
	w := newWeirctl(t, b)

	type broker struct {
		ID      int32 `json:"id"`
		Leaders int   `json:"leaders"`
	}
	type summary struct {
		ClusterID  string   `json:"cluster_id"`
		Controller int32    `json:"controller"`
		Brokers    []broker `json:"brokers"`
		Topics     int      `json:"topics"`
		Partitions int      `json:"partitions"`
		Healthy    bool     `json:"healthy"`
		Leaderless []string `json:"leaderless_partitions"`
	}
	info := decodeJSON[summary](t, w.ok(t, "", "cluster", "info", "--format", "json"))
	// 3 partitions of "info" plus the internal __consumer_offsets.
	if info.ClusterID == "" || info.Controller != int32(b.NodeID) || len(info.Brokers) != 1 || info.Topics != 2 || info.Partitions < 4 {
		t.Fatalf("cluster info: %+v", info)
	}
	if info.Brokers[0].Leaders != info.Partitions {
		t.Fatalf("the only broker leads %d of %d partitions", info.Brokers[0].Leaders, info.Partitions)
	}
	health := decodeJSON[summary](t, w.ok(t, "", "cluster", "health", "--format", "json"))
	if !health.Healthy || len(health.Leaderless) != 0 {
		t.Fatalf("cluster health: %+v", health)
	}
	if out := w.ok(t, "", "cluster", "info").stdout; len(out) == 0 {
		t.Fatal("empty table output")
	}
}
