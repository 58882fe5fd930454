package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEveryAPIEveryVersion sends each served API at each advertised
// version with kmsg's default (empty) request and expects a response
// that decodes at that version: no version is advertised that the broker
// cannot read and answer.
func TestEveryAPIEveryVersion(t *testing.T) {
	s, _, addr := startServer(t)
	c := dial(t, addr)
	for _, a := range s.apis {
		if a.name == "" {
			continue
		}
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(a.key)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.FetchRequest:
				r.MaxWaitMillis = 0
			case *kmsg.ProduceRequest:
				r.Acks = -1 // acks=0 has no response to wait for
			}
			resp := c.roundTrip(req)
			if resp.GetVersion() != v {
				t.Errorf("%s v%d: answered v%d", a.name, v, resp.GetVersion())
			}
		}
	}
}
