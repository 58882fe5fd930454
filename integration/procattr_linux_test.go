//go:build linux

package integration

import (
	"os/exec"
	"syscall"
)

// setProcAttrs makes the kernel SIGKILL the broker if the test binary dies
// without running its cleanups, so no broker outlives a crashed test.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
