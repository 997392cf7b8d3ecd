package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podRun is the processes of one pod.
type podRun struct {
	uid    types.UID
	ctx    context.Context
	cancel context.CancelFunc
	grace  atomic.Int64 // set before cancel: how long SIGTERM has before SIGKILL
	done   chan struct{}
}

func (r *podRun) stop(grace time.Duration) {
	r.grace.Store(int64(grace))
	r.cancel()
}

func (r *podRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// proc is one container's process.
type proc struct {
	i    int
	cmd  *exec.Cmd
	log  *os.File
	term string // termination message file
}

func (n *Node) runPod(ctx context.Context, key string, r *podRun, pod *corev1.Pod) {
	defer n.wg.Done()
	defer n.queue.Add(key) // a deletion may wait for this run to end
	defer close(r.done)
	log := n.Log.WithValues("pod", key)

	states := make([]containerState, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		states[i] = containerState{Name: c.Name, Image: c.Image}
	}
	failAll := func(reason, msg string) {
		now := time.Now()
		for i := range states {
			states[i].Finished, states[i].ExitCode, states[i].Reason, states[i].Message = now, 128, reason, msg
		}
		if err := n.writeStatus(ctx, pod, states); err != nil && ctx.Err() == nil {
			log.Error(err, "write pod status")
		}
	}
	if len(pod.Spec.InitContainers) > 0 {
		failAll("StartError", "executor local does not run init containers")
		return
	}

	// Env comes first: like a kubelet, wait (and say why) while a referenced
	// ConfigMap or Secret is missing.
	var envs [][]string
	var argvs [][]string
	for {
		var err error
		envs, argvs, err = n.prepare(ctx, pod)
		if err == nil {
			break
		}
		var nr noRun
		if errors.As(err, &nr) {
			failAll("StartError", err.Error())
			return
		}
		for i := range states {
			states[i].Waiting, states[i].WaitingMessage = "CreateContainerConfigError", err.Error()
		}
		if werr := n.writeStatus(ctx, pod, states); werr != nil && ctx.Err() == nil {
			log.Error(werr, "write pod status")
		}
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}

	select {
	case n.sem <- struct{}{}:
	case <-r.ctx.Done():
		return
	}
	defer func() { <-n.sem }()

	dir := n.PodDir(pod.Namespace, pod.Name)
	work := filepath.Join(dir, "work")
	// A pod name is reused by a new pod in a new control plane: start clean.
	if err := os.RemoveAll(dir); err != nil {
		failAll("StartError", err.Error())
		return
	}
	if err := os.MkdirAll(work, 0o750); err != nil {
		failAll("StartError", err.Error())
		return
	}

	var procs []*proc
	for i, c := range pod.Spec.Containers {
		p, err := startProcess(i, c.Name, dir, work, envs[i], argvs[i])
		if err != nil {
			states[i].Finished, states[i].ExitCode, states[i].Reason, states[i].Message = time.Now(), 128, "StartError", err.Error()
			continue
		}
		states[i].PID, states[i].Started = p.cmd.Process.Pid, time.Now()
		procs = append(procs, p)
		log.Info("container started", "container", c.Name, "pid", p.cmd.Process.Pid, "log", p.log.Name())
	}
	if len(procs) > 0 {
		if err := n.writeStatus(ctx, pod, states); err != nil && ctx.Err() == nil {
			log.Error(err, "write pod status")
		}
	}

	type exit struct {
		i    int
		code int32
		at   time.Time
	}
	exits := make(chan exit, len(procs))
	for _, p := range procs {
		go func() {
			_ = p.cmd.Wait()
			at := time.Now()
			// The container ends with its main process, as in a cgroup:
			// nothing it started may outlive it.
			killGroup(p.cmd.Process.Pid, syscall.SIGKILL)
			_ = p.log.Close()
			exits <- exit{p.i, exitCode(p.cmd.ProcessState), at}
		}()
	}
	signalAll := func(sig syscall.Signal) {
		for _, p := range procs {
			killGroup(p.cmd.Process.Pid, sig)
		}
	}
	stopping := r.ctx.Done()
	var kill <-chan time.Time
	for left := len(procs); left > 0; {
		select {
		case e := <-exits:
			left--
			states[e.i].Finished, states[e.i].ExitCode, states[e.i].Reason = e.at, e.code, exitReason(e.code)
		case <-stopping:
			stopping = nil
			signalAll(syscall.SIGTERM)
			kill = time.After(time.Duration(r.grace.Load()))
		case <-kill:
			kill = nil
			signalAll(syscall.SIGKILL)
		}
	}
	for _, p := range procs {
		s := &states[p.i]
		file, _ := os.ReadFile(p.term)
		logBytes, _ := readTail(p.log.Name(), maxFallbackBytes)
		s.Message = terminationMessage(file, logBytes, pod.Spec.Containers[p.i].TerminationMessagePolicy, s.ExitCode)
		log.Info("container exited", "container", s.Name, "exitCode", s.ExitCode, "log", p.log.Name())
	}
	if ctx.Err() != nil {
		return // the node is stopping: the API server may already be gone
	}
	if err := n.writeStatus(ctx, pod, states); err != nil {
		log.Error(err, "write pod status")
	}
}

// noRun is an error that retrying cannot fix: the container cannot run here.
type noRun struct{ error }

// prepare computes each container's environment and command line.
func (n *Node) prepare(ctx context.Context, pod *corev1.Pod) (envs, argvs [][]string, err error) {
	one := func(kind, ns, name, key string) (string, bool, error) {
		m, found, err := n.readRef(ctx, kind, ns, name)
		if err != nil || !found {
			return "", found, err
		}
		v, ok := m[key]
		return v, ok, nil
	}
	all := func(kind, ns, name string) (map[string]string, bool, error) { return n.readRef(ctx, kind, ns, name) }
	dir := n.PodDir(pod.Namespace, pod.Name)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		base := map[string]string{
			"PATH":                os.Getenv("PATH"),
			"HOME":                filepath.Join(dir, "work"),
			"HOSTNAME":            pod.Name,
			TerminationMessageEnv: filepath.Join(dir, c.Name+".termination-log"),
		}
		if base["PATH"] == "" {
			base["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		}
		env, err := containerEnv(pod, c, base, one, all)
		if err != nil {
			return nil, nil, err
		}
		av, err := argv(c, env)
		if err != nil {
			return nil, nil, noRun{err}
		}
		envs, argvs = append(envs, env), append(argvs, av)
	}
	return envs, argvs, nil
}

func (n *Node) readRef(ctx context.Context, kind, ns, name string) (map[string]string, bool, error) {
	switch kind {
	case "configmap":
		cm, err := n.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		m := map[string]string{}
		for k, v := range cm.Data {
			m[k] = v
		}
		for k, v := range cm.BinaryData {
			m[k] = string(v)
		}
		return m, true, nil
	case "secret":
		s, err := n.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		m := map[string]string{}
		for k, v := range s.Data {
			m[k] = string(v)
		}
		return m, true, nil
	}
	return nil, false, fmt.Errorf("unknown kind %s", kind)
}

func startProcess(i int, name, dir, work string, env, av []string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(av[0], av[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, env, logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_, _ = fmt.Fprintf(logf, "executor local: cannot start %q: %v\n", av[0], err)
		_ = logf.Close()
		return nil, err
	}
	return &proc{i: i, cmd: cmd, log: logf, term: filepath.Join(dir, name+".termination-log")}, nil
}

// exitCode is the container's exit code; a signal counts as 128+signal, as in a container runtime.
func exitCode(ps *os.ProcessState) int32 {
	if ps == nil {
		return 128
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int32(128 + int(ws.Signal()))
	}
	return int32(ps.ExitCode())
}

// readTail is the last max bytes of a file.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max64(st.Size()-max, 0)
	b := make([]byte, st.Size()-off)
	_, err = f.ReadAt(b, off)
	return b, err
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
