package kwokrig

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Proc is a subprocess in its own process group, its output in a log file.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// StartProc starts bin with args; stdout and stderr go to logPath (appended,
// so that a restarted process keeps its earlier lines).
func StartProc(name, logPath, bin string, args ...string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file holding the process's output.
func (p *Proc) LogPath() string { return p.log.Name() }

// Exited says whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (nil while it runs).
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// ExitError describes an ended process for an error message.
func (p *Proc) ExitError() error {
	return fmt.Errorf("%s exited: %v (log %s)", p.Name, p.Err(), p.LogPath())
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Proc) Stop(grace time.Duration) {
	if p == nil {
		return
	}
	if !p.Exited() {
		_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
			<-p.done
		}
	}
	_ = p.log.Close()
}

// Kill sends SIGKILL to the process group and waits for the process to end.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	if !p.Exited() {
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.done
	}
	_ = p.log.Close()
}

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitHTTP waits until url answers 200, failing early when p exits.
func WaitHTTP(ctx context.Context, url string, d time.Duration, p *Proc) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p != nil && p.Exited() {
			return p.ExitError()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %s: %v", url, d, err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// WaitTCP waits until addr accepts connections, failing early when p exits.
func WaitTCP(ctx context.Context, addr string, d time.Duration, p *Proc) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if p != nil && p.Exited() {
			return p.ExitError()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listening on %s after %s", addr, d)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// WaitLogLine waits until p's log holds line at or after offset bytes (a
// restarted process appends to its log: pass the size before the restart).
func WaitLogLine(ctx context.Context, p *Proc, line string, offset int64, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if b, err := os.ReadFile(p.LogPath()); err == nil && int64(len(b)) > offset && strings.Contains(string(b[offset:]), line) {
			return nil
		}
		if p.Exited() {
			return p.ExitError()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (log %s)", p.Name, d, p.LogPath())
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// LogSize is the current size of p's log, for WaitLogLine after a restart.
func LogSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
