//go:build !linux

package chaos

import (
	"errors"
	"math/rand/v2"
)

// NamespacesAvailable: network namespaces are Linux's.
func NamespacesAvailable() error { return errors.New("network namespaces need Linux") }

// NewNamespaceNetwork is unavailable off Linux.
func NewNamespaceNetwork(int, *rand.Rand, func(string, ...any)) (Network, error) {
	return nil, NamespacesAvailable()
}
