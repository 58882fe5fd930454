package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestErrorCodeAndMessage(t *testing.T) {
	err := fmt.Errorf("%w: topic %q already exists", kerr.TopicAlreadyExists, "demo")
	if errorCode(err) != kerr.TopicAlreadyExists.Code {
		t.Fatalf("code %d", errorCode(err))
	}
	if msg := errorMessage(err); msg == nil || *msg != `topic "demo" already exists` {
		t.Fatalf("message %v", msg)
	}
	if msg := errorMessage(kerr.InvalidConfig); msg != nil {
		t.Fatalf("bare code should have no detail, got %q", *msg)
	}
	if errorCode(fmt.Errorf("disk on fire")) != kerr.UnknownServerError.Code || errorCode(nil) != 0 {
		t.Fatal("unexpected errors are UNKNOWN_SERVER_ERROR, nil is 0")
	}
}
