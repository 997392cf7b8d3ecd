// Package container is the built-in plugin that runs a task's container as
// one pod per attempt. Decisions (the pod to build, what a pod's status
// means, what a create error means) are pure functions; the plugin methods
// only do the API calls around them.
package container

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// ID is the plugin's identifier.
const ID = "container"

// TaskTypes are the task types the plugin serves.
var TaskTypes = []string{"container", "python", "python-task", "raw-container", "sidecar"}

// Error codes of launch failures.
const (
	CodeBadRequest      = "BadRequest"
	CodeInvalidResource = "InvalidResource"
	CodeEntityTooLarge  = "EntityTooLarge"
	CodeForbidden       = "Forbidden"
	CodeQuotaExceeded   = "QuotaExceeded"
	CodeAlreadyExists   = "AlreadyExists"
)

// ErrPodTerminating is wrapped by Launch when the attempt's pod name is still
// held by a pod that is being deleted (an earlier try of the attempt, or a
// stale pod of a TaskAction of the same name): try again once it is gone.
var ErrPodTerminating = errors.New("a pod with this name is still being deleted")

// Plugin runs container tasks as pods.
type Plugin struct {
	// Now is the clock of the grace periods; time.Now when nil.
	Now func() time.Time
}

var _ plugin.Plugin = (*Plugin)(nil)

// New returns the container plugin.
func New() *Plugin { return &Plugin{} }

// ID implements plugin.Plugin.
func (p *Plugin) ID() string { return ID }

// TaskTypes implements plugin.Plugin.
func (p *Plugin) TaskTypes() []string { return append([]string(nil), TaskTypes...) }

// ResourceName is the attempt's pod name.
func (p *Plugin) ResourceName(tc plugin.TaskContext) string {
	return PodName(tc.TaskAction.Name, tc.Attempt)
}

// WatchedTypes implements plugin.Plugin.
func (p *Plugin) WatchedTypes() []client.Object { return []client.Object{podType} }

// podType names the type only; it is never filled (the reconciler asks for
// the types on every read).
var podType = &corev1.Pod{}

// Launch creates the attempt's pod. An existing pod of ours is success.
func (p *Plugin) Launch(ctx context.Context, c client.Client, tc plugin.TaskContext) error {
	pod, err := BuildPod(tc)
	if err != nil {
		return err
	}
	err = c.Create(ctx, pod)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return CreateError(pod.Namespace+"/"+pod.Name, err)
	}
	existing := &corev1.Pod{}
	if gerr := c.Get(ctx, client.ObjectKeyFromObject(pod), existing); gerr != nil {
		// Gone again, or not in the cache yet: the next try will tell.
		return fmt.Errorf("pod %s/%s exists but cannot be read: %w", pod.Namespace, pod.Name, gerr)
	}
	return ExistingPod(existing, tc.TaskAction)
}

// ExistingPod decides what a pod found under the attempt's name means for a
// launch: nil if it is ours and alive; ErrPodTerminating (wrapped, transient)
// if it is going away or belongs to an earlier TaskAction of the same name
// (the garbage collector removes it); a permanent *plugin.LaunchError if
// something else holds the name.
func ExistingPod(pod *corev1.Pod, ta *flytev1.TaskAction) error {
	owner := metav1.GetControllerOf(pod)
	switch {
	case pod.DeletionTimestamp != nil:
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ErrPodTerminating)
	case ownedBy(pod, ta):
		return nil
	case owner != nil && isTaskAction(owner) && owner.Name == ta.Name:
		return fmt.Errorf("pod %s/%s belongs to an earlier TaskAction named %s (uid %s): %w", pod.Namespace, pod.Name, ta.Name, owner.UID, ErrPodTerminating)
	}
	return &plugin.LaunchError{
		Err: plugin.ExecError{
			Code:    CodeAlreadyExists,
			Kind:    flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("pod %s/%s already exists and is not owned by this TaskAction", pod.Namespace, pod.Name),
		},
		Retryable: false,
	}
}

func isTaskAction(o *metav1.OwnerReference) bool {
	return o.Kind == "TaskAction" && o.APIVersion == flytev1.GroupVersion.String()
}

// CreateError maps an error creating pod (namespace/name) to a launch
// outcome: the API server refusing the pod itself is a permanent failure
// (retrying sends the same pod), a refusal by policy (quota, admission) ends
// the attempt but another may pass, and anything else is returned wrapped
// for the caller to retry as a system failure.
func CreateError(pod string, err error) error {
	perm := func(code string) error {
		return &plugin.LaunchError{Err: plugin.ExecError{Code: code, Kind: flytev1.ErrorKindUser,
			Message: truncate(fmt.Sprintf("pod %s was rejected: %v", pod, err), maxMessage)}}
	}
	switch {
	case apierrors.IsInvalid(err):
		return perm(CodeInvalidResource)
	case apierrors.IsRequestEntityTooLargeError(err):
		return perm(CodeEntityTooLarge)
	case apierrors.IsBadRequest(err):
		return perm(CodeBadRequest)
	case apierrors.IsForbidden(err):
		code := CodeForbidden
		if strings.Contains(err.Error(), "exceeded quota") {
			code = CodeQuotaExceeded
		}
		return &plugin.LaunchError{Retryable: true, Err: plugin.ExecError{Code: code, Kind: flytev1.ErrorKindUser,
			Message: truncate(fmt.Sprintf("pod %s was refused: %v", pod, err), maxMessage)}}
	}
	return fmt.Errorf("create pod %s: %w", pod, err)
}

// Observe reads the attempt's pod from r. A missing pod, or one that is not
// ours, is PhaseNotStarted.
func (p *Plugin) Observe(ctx context.Context, r client.Reader, tc plugin.TaskContext) (plugin.Observation, error) {
	pod := &corev1.Pod{}
	key := types.NamespacedName{Namespace: tc.TaskAction.Namespace, Name: p.ResourceName(tc)}
	if err := r.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return plugin.Observation{Phase: plugin.PhaseNotStarted}, nil
		}
		return plugin.Observation{}, fmt.Errorf("get pod %s: %w", key, err)
	}
	if !ownedBy(pod, tc.TaskAction) {
		// Not this attempt's pod; Launch reports the name conflict.
		return plugin.Observation{Phase: plugin.PhaseNotStarted, Message: fmt.Sprintf("pod %s is not owned by this TaskAction", key)}, nil
	}
	now := tc.Now
	if now.IsZero() {
		now = p.now()
	}
	return ObservePod(pod, now, tc.Settings), nil
}

// Finalize has nothing to release: the pods go with their TaskAction.
func (p *Plugin) Finalize(context.Context, client.Client, plugin.TaskContext) error { return nil }

func (p *Plugin) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// ownedBy says whether ta is pod's controller. Without a UID to compare (a
// TaskAction not read from the API server) any TaskAction controller of
// that name counts.
func ownedBy(pod *corev1.Pod, ta *flytev1.TaskAction) bool {
	o := metav1.GetControllerOf(pod)
	if o == nil || !isTaskAction(o) {
		return false
	}
	if ta.UID == "" {
		return o.Name == ta.Name
	}
	return o.UID == ta.UID
}
