package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// unrelatedNamespace holds the --unrelated objects: TaskActions and pods of
// another namespace, which a controller scoped to benchNamespace neither
// caches nor touches.
const unrelatedNamespace = "bench-unrelated"

func unrelatedName(i int) string { return fmt.Sprintf("unrelated-%05d", i) }

// unrelatedPod is a plain pod nobody runs: no scheduler has its name, so it
// is never bound (and kwok runs only bound pods), and it has none of the
// executor's labels.
func unrelatedPod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: unrelatedName(i), Namespace: unrelatedNamespace},
		Spec: corev1.PodSpec{SchedulerName: "none-bench",
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
}

// unrelatedTaskAction is TaskAction i of the workload, moved to
// unrelatedNamespace and renamed, so that the harness's observer, which
// knows TaskActions by name, never mistakes it for the workload's.
func unrelatedTaskAction(o options, i int, bucket string) (*flytev1.TaskAction, error) {
	ta, _, err := workloadTaskAction(o, i, bucket)
	if err != nil {
		return nil, err
	}
	ta.Name, ta.Namespace = unrelatedName(i), unrelatedNamespace
	return ta, nil
}

// createUnrelated creates unrelatedNamespace and o.Unrelated TaskActions and
// as many pods in it, o.Creators at a time.
func createUnrelated(ctx context.Context, o options, cl client.Client, bucket string) error {
	start := time.Now()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unrelatedNamespace}}); err != nil {
		return fmt.Errorf("create namespace %s: %w", unrelatedNamespace, err)
	}
	err := inParallel(ctx, o.Creators, 0, o.Unrelated, 0, func(i int) error {
		ta, err := unrelatedTaskAction(o, i, bucket)
		if err != nil {
			return err
		}
		for _, obj := range []client.Object{ta, unrelatedPod(i)} {
			if err := createRetrying(ctx, cl, obj); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	logf("%d unrelated TaskActions and %d unrelated pods created in namespace %s in %.1fs",
		o.Unrelated, o.Unrelated, unrelatedNamespace, time.Since(start).Seconds())
	return nil
}
