package controller

import (
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskaction/executor/internal/lazylog"
)

// reconcileLogger is the logger of one reconcile, with the keys
// controller-runtime's builder would give it, encoded only if it logs.
func reconcileLogger(base logr.Logger) func(*reconcile.Request) logr.Logger {
	l := lazylog.New(base).WithValues("controller", "taskaction", "controllerGroup", "flyte.org", "controllerKind", "TaskAction")
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return l
		}
		return l.WithValues("TaskAction", klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
	}
}
