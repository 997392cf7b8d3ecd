package local

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// register creates the Node (or takes over one of the same name) and writes
// its capacity, address, log endpoint and Ready condition.
func (n *Node) register(ctx context.Context, logsPort int32) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
		"kubernetes.io/hostname": n.Name, "kubernetes.io/os": runtime.GOOS, "kubernetes.io/arch": runtime.GOARCH,
		"node.kubernetes.io/instance-type": "local",
	}}}
	cur, err := n.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, err = n.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("local node: register Node %s: %w", n.Name, err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(n.MaxPods), resource.DecimalSI),
	}
	cur.Status.Capacity, cur.Status.Allocatable = res, res
	cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: loopbackIP}}
	cur.Status.DaemonEndpoints.KubeletEndpoint.Port = logsPort
	cur.Status.NodeInfo = corev1.NodeSystemInfo{
		OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
		KubeletVersion: "executor-local", ContainerRuntimeVersion: "local://process",
	}
	cur.Status.Conditions = readyCondition(time.Now())
	if _, err := n.cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("local node: Node %s status: %w", n.Name, err)
	}
	return nil
}

// heartbeat renews the Node's Ready condition.
func (n *Node) heartbeat(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := n.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewTime(time.Now())
		for i := range cur.Status.Conditions {
			if cur.Status.Conditions[i].Type == corev1.NodeReady {
				cur.Status.Conditions[i].LastHeartbeatTime = now
			}
		}
		_, err = n.cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func readyCondition(now time.Time) []corev1.NodeCondition {
	t := metav1.NewTime(now)
	return []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "executor local runs pods as local processes", LastHeartbeatTime: t, LastTransitionTime: t,
	}}
}

// memTotal is the machine's memory from /proc/meminfo, or 8Gi if unknown.
func memTotal() int64 {
	const fallback = 8 << 30
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallback
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return fallback
}
