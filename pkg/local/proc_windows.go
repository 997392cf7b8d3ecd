package local

import (
	"os"
	"syscall"
)

// Windows has no process groups to signal: the process alone is killed.
// executor local is meant for Linux and macOS; this keeps the binary building.
func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int, _ syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
