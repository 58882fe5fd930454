package kafka

// ApiVersions, v0-v4.
//
// Behaviour:
//   - Lists every API in the table with its version range.
//   - A request above v4 is answered in the v0 format with
//     UNSUPPORTED_VERSION and the full list (KIP-511), so the client can
//     retry at a version both sides speak; the connection stays open.
//   - The response header is always v0, even for flexible versions.
//   - Client software name and version (v3+) are accepted as sent.
//   - No supported or finalized features are advertised: clients change
//     behaviour on features weir would then have to implement.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleApiVersions(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = s.apis.versions()
	return resp, nil
}

func (t apiTable) versions() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, a := range t {
		if a.name != "" {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: a.key, MinVersion: a.min, MaxVersion: a.max})
		}
	}
	return out
}

func unsupportedAPIVersions(t apiTable) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = t.versions()
	return resp
}
