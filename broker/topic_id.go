package broker

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// TopicID is a topic's UUID, given at creation and never reused, so a
// deleted and re-created topic is a different topic to clients (Fetch v13+
// addresses topics by ID).
type TopicID [16]byte

func newTopicID() TopicID {
	for {
		var id TopicID
		_, _ = rand.Read(id[:])
		// Kafka reserves the zero UUID and the one with only the lowest bit
		// set; skip both (and anything beginning with '-' in base64, as
		// Kafka does, so IDs never look like command-line flags).
		if id != (TopicID{}) && id != (TopicID{15: 1}) && id.String()[0] != '-' {
			return id
		}
	}
}

// String is Kafka's rendering: URL-safe base64 without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

func (id *TopicID) UnmarshalText(b []byte) error {
	n, err := base64.RawURLEncoding.Decode(id[:], b)
	if err != nil || n != len(id) {
		return fmt.Errorf("topic id %q: not a 16-byte base64 value", b)
	}
	return nil
}
