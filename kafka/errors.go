package kafka

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
)

// errorCode is the wire code of err. Broker errors wrap *kerr.Error; any
// other error is unexpected and reads as UNKNOWN_SERVER_ERROR, which the
// broker avoids for anything retriable.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// errorMessage is the text for the error_message fields of newer
// versions: the detail the broker wrapped around the code, without the
// code's own name and description, which clients print themselves.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		msg = strings.TrimPrefix(msg, ke.Error())
		msg = strings.TrimPrefix(msg, ": ")
	}
	if msg == "" {
		return nil
	}
	if len(msg) > maxErrorMessageBytes {
		// Cut at a character boundary, so the message stays UTF-8.
		cut := maxErrorMessageBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return &msg
}

// maxErrorMessageBytes bounds an error message. Messages quote what the
// request named, and quoting can grow it (%q writes a NUL byte as four):
// past 32767 bytes a string's int16 length prefix wraps and the response
// no longer parses.
const maxErrorMessageBytes = 4096
