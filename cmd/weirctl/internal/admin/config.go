package admin

// ConfigStatus is one live broker's entry in GET /v1/cluster_config/status.
type ConfigStatus struct {
	NodeID        int32    `json:"node_id"`
	ConfigVersion int64    `json:"config_version"`
	Restart       bool     `json:"restart"`
	Invalid       []string `json:"invalid"`
	Unknown       []string `json:"unknown"`
	Error         string   `json:"error,omitempty"`
}
