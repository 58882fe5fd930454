//go:build !linux

package integration

import "os/exec"

func setProcAttrs(cmd *exec.Cmd) {}
