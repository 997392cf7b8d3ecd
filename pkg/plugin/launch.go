package plugin

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// LabelManaged marks every object a plugin creates for a TaskAction: the
// executor's informers hold only objects with it.
const LabelManaged = "flyte.org/managed"

// Error codes of launch failures, the same for every kind of object.
const (
	CodeBadRequest      = "BadRequest"
	CodeInvalidResource = "InvalidResource"
	CodeEntityTooLarge  = "EntityTooLarge"
	CodeForbidden       = "Forbidden"
	CodeQuotaExceeded   = "QuotaExceeded"
	CodeAlreadyExists   = "AlreadyExists"
)

// ErrResourceTerminating is wrapped by a launch when the attempt's object
// name is still held by an object being deleted (an earlier try of the
// attempt, or an object of an earlier TaskAction of the same name): try again
// once it is gone.
var ErrResourceTerminating = errors.New("an object with this name is still being deleted")

// maxLaunchMessage bounds the API server's words kept in a launch error.
const maxLaunchMessage = 4096

// ControllerRef is the owner reference that makes ta the controller of an
// object a plugin creates for it (Kubernetes' garbage collector removes the
// object with it; the executor never touches an object without it).
func ControllerRef(ta *flytev1.TaskAction) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: flytev1.GroupVersion.String(), Kind: "TaskAction", Name: ta.Name,
		UID: ta.UID, Controller: &t, BlockOwnerDeletion: &t}
}

// IsTaskActionRef says whether o refers to a TaskAction.
func IsTaskActionRef(o *metav1.OwnerReference) bool {
	return o.Kind == "TaskAction" && o.APIVersion == flytev1.GroupVersion.String()
}

// Holder says who controls an object found under an attempt's name.
type Holder uint8

const (
	// HeldByOther: anything but a TaskAction of this name; never touched.
	HeldByOther Holder = iota
	// HeldByThis: this TaskAction (a controller reference with its UID).
	HeldByThis
	// HeldByPrevious: an earlier TaskAction of the same name (deleted and
	// created again); Kubernetes' garbage collector removes the object.
	HeldByPrevious
)

// HolderOf is the one rule of ownership: who of ta's name controls obj.
// Without a UID to compare (a TaskAction not read from the API server) any
// TaskAction controller of that name counts as this one.
func HolderOf(obj metav1.Object, ta *flytev1.TaskAction) Holder {
	o := metav1.GetControllerOfNoCopy(obj)
	switch {
	case o == nil || !IsTaskActionRef(o) || o.Name != ta.Name:
		return HeldByOther
	case ta.UID == "" || o.UID == ta.UID:
		return HeldByThis
	}
	return HeldByPrevious
}

// OwnedBy says whether ta is obj's controller (HolderOf).
func OwnedBy(obj metav1.Object, ta *flytev1.TaskAction) bool { return HolderOf(obj, ta) == HeldByThis }

// ReadAttempt reads the attempt's object, name, into obj. started is false,
// with the observation to report, while the object does not exist or is not
// this TaskAction's (HolderOf; Launch reports a name conflict): the attempt
// has not started. kind names the object in messages.
func ReadAttempt(ctx context.Context, r client.Reader, tc TaskContext, name, kind string, obj client.Object) (notStarted Observation, started bool, err error) {
	key := types.NamespacedName{Namespace: tc.TaskAction.Namespace, Name: name}
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return Observation{Phase: PhaseNotStarted}, false, nil
		}
		return Observation{}, false, fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	if !OwnedBy(obj, tc.TaskAction) {
		return Observation{Phase: PhaseNotStarted, Message: fmt.Sprintf("%s %s is not owned by this TaskAction", kind, key)}, false, nil
	}
	return Observation{}, true, nil
}

// Create creates obj, an attempt's object that ta controls, idempotently: an
// object of the same name that is already ours is success; one being deleted,
// or an earlier TaskAction's of the same name, is ErrResourceTerminating
// (wrapped, transient); anything else holding the name is a permanent
// LaunchError. Refusals map as CreateError says.
func Create(ctx context.Context, c client.Client, obj client.Object, ta *flytev1.TaskAction) error {
	kind := kindOf(obj)
	name := obj.GetNamespace() + "/" + obj.GetName()
	err := c.Create(ctx, obj)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return CreateError(kind+" "+name, err)
	}
	existing := NewObject(obj)
	if gerr := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); gerr != nil {
		// Gone again, or not in the cache yet: the next try will tell.
		return fmt.Errorf("%s %s exists but cannot be read: %w", kind, name, gerr)
	}
	return Existing(existing, ta)
}

// Existing decides what an object found under the attempt's name means for a
// launch: nil if it is ours and alive; ErrResourceTerminating (wrapped,
// transient) if it is going away or belongs to an earlier TaskAction of the
// same name (the garbage collector removes it); a permanent LaunchError if
// something else holds the name.
func Existing(obj client.Object, ta *flytev1.TaskAction) error {
	kind, name := kindOf(obj), obj.GetNamespace()+"/"+obj.GetName()
	holder := HolderOf(obj, ta)
	switch {
	case obj.GetDeletionTimestamp() != nil:
		return fmt.Errorf("%s %s: %w", kind, name, ErrResourceTerminating)
	case holder == HeldByThis:
		return nil
	case holder == HeldByPrevious:
		return fmt.Errorf("%s %s belongs to an earlier TaskAction named %s (uid %s): %w", kind, name, ta.Name, metav1.GetControllerOfNoCopy(obj).UID, ErrResourceTerminating)
	}
	return &LaunchError{Err: ExecError{Code: CodeAlreadyExists, Kind: flytev1.ErrorKindSystem,
		Message: fmt.Sprintf("%s %s already exists and is not owned by this TaskAction", kind, name)}}
}

// CreateError maps an error creating an object (described as "kind
// namespace/name") to a launch outcome: the API server refusing the object
// itself is a permanent failure (retrying sends the same object), a refusal
// by policy (quota, admission) ends the attempt but another may pass, and
// anything else is returned wrapped for the caller to retry as a system
// failure.
func CreateError(what string, err error) error {
	perm := func(code string) error {
		return &LaunchError{Err: ExecError{Code: code, Kind: flytev1.ErrorKindUser,
			Message: Truncate(fmt.Sprintf("%s was rejected: %v", what, err), maxLaunchMessage)}}
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
		return &LaunchError{Retryable: true, Err: ExecError{Code: code, Kind: flytev1.ErrorKindUser,
			Message: Truncate(fmt.Sprintf("%s was refused: %v", what, err), maxLaunchMessage)}}
	}
	return fmt.Errorf("create %s: %w", what, err)
}

// NewObject is an empty object of obj's type (for an unstructured one, of
// its kind), to read into.
func NewObject(obj client.Object) client.Object {
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		out.(*unstructured.Unstructured).SetGroupVersionKind(u.GroupVersionKind())
	}
	return out
}

// kindOf names obj's kind for messages: its type name, lower case (pod,
// rayjob, ...), as its TypeMeta is often empty.
func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return strings.ToLower(k)
	}
	return strings.ToLower(reflect.TypeOf(obj).Elem().Name())
}
