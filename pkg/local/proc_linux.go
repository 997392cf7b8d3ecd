package local

import "syscall"

// sysProcAttr puts a task in its own process group, so that deleting the pod
// kills what it started too, and kills it if this process dies, so that no
// task outlives executor local.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
