package harness

import (
	"errors"
	"io"
)

// MaxFetchMaxBytes keeps --fetch-max-bytes (and the read buffer sized
// from it) within what a client can sensibly buffer per consumer.
const MaxFetchMaxBytes = 1 << 30

// NoEOF reports an EOF in the middle of a response as what it is, a
// response cut short.
func NoEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
