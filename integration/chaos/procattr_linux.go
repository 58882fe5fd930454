//go:build linux

package chaos

import (
	"os/exec"
	"syscall"
)

// setProcAttrs has the kernel SIGKILL the broker if the test process dies
// without stopping it. ip netns exec execs the broker in place, and the
// death signal survives exec.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
