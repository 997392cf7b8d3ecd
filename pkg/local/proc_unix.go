//go:build unix

package local

import "syscall"

// killGroup signals the process group led by pid.
func killGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}
