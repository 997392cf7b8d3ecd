//go:build unix && !linux

package local

import "syscall"

// sysProcAttr puts a task in its own process group, so that deleting the pod
// kills what it started too. Without Linux's parent-death signal, a task
// survives executor local only if executor local is killed with SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
