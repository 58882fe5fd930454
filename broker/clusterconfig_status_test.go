package broker

import (
	"context"
	"testing"
)

func TestConfigStatusRestart(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	st := b.LocalConfigStatus()
	if st.NodeID != 0 || st.Restart || len(st.Invalid) != 0 || len(st.Unknown) != 0 {
		t.Fatalf("fresh broker: %+v", st)
	}
	// A live property does not need a restart.
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "log_retention_ms", Value: "1000"}}, false); err != nil {
		t.Fatal(err)
	}
	if st := b.LocalConfigStatus(); st.Restart || st.ConfigVersion != b.ClusterConfigVersion() {
		t.Fatalf("after a live change: %+v (version %d)", st, b.ClusterConfigVersion())
	}
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "group_topic_partitions", Value: "3"}}, false); err != nil {
		t.Fatal(err)
	}
	if st := b.LocalConfigStatus(); !st.Restart {
		t.Fatalf("group_topic_partitions changed since start: %+v", st)
	}
	// Back to the value this process started with: no restart needed.
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "group_topic_partitions", Remove: true}}, false); err != nil {
		t.Fatal(err)
	}
	all := b.ClusterConfigStatus(context.Background())
	if len(all) != 1 || all[0].Restart || all[0].ConfigVersion != b.ClusterConfigVersion() {
		t.Fatalf("cluster status: %+v", all)
	}
}
