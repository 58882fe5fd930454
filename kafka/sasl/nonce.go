package sasl

import (
	"errors"
	"fmt"
	"io"
)

// serverNonceLen is the length of the nonce the server appends to the
// client's: RFC 7677's example's, 30 printable characters, about 196 bits.
const serverNonceLen = 30

// maxNonceBytes bounds what serverNonce reads: a source that keeps giving
// unprintable bytes is broken, not unlucky (random bytes are printable
// about 36% of the time).
const maxNonceBytes = 64 * serverNonceLen

// serverNonce reads serverNonceLen printable characters from r, keeping
// the bytes that are printable and dropping the rest: every character is
// then equally likely, which mapping bytes onto the alphabet would not
// give. It is also why a fixed reader can replay a given nonce in tests.
func serverNonce(r io.Reader) (string, error) {
	nonce := make([]byte, 0, serverNonceLen)
	buf := make([]byte, serverNonceLen)
	for read := 0; len(nonce) < serverNonceLen; {
		if read >= maxNonceBytes {
			return "", errors.New("sasl: nonce source gives too few printable bytes")
		}
		n := serverNonceLen - len(nonce)
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return "", fmt.Errorf("sasl: reading a nonce: %w", err)
		}
		read += n
		for _, b := range buf[:n] {
			if isPrintableByte(b) {
				nonce = append(nonce, b)
			}
		}
	}
	return string(nonce), nil
}
