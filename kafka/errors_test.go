package kafka

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

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

// TestErrorMessageBounded: a message quoting a long name is cut, at a
// character boundary, well below the 32767 bytes a string can carry.
func TestErrorMessageBounded(t *testing.T) {
	name := "x" + strings.Repeat("\x00é", 10000) // %q writes each NUL as four bytes
	full := fmt.Sprintf("unknown topic config %q", name)
	if utf8.ValidString(full[:maxErrorMessageBytes]) {
		t.Fatal("a plain cut would not split a character: the test proves nothing")
	}
	msg := errorMessage(fmt.Errorf("%w: %s", kerr.InvalidConfig, full))
	if msg == nil || len(*msg) > maxErrorMessageBytes+len("...") || !strings.HasSuffix(*msg, "...") {
		t.Fatalf("message of %d bytes", len(*msg))
	}
	if !utf8.ValidString(*msg) {
		t.Fatal("message cut inside a character")
	}
}
