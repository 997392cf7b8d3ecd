package envtest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskaction/executor/pkg/controller"
)

// TestPodCreatorAnswersWithMetadataOnly: the API server answers the pod's
// create with its metadata alone, and the pod handed back has what a launch
// reads from it (resourceVersion, UID, creation time, the labels stored,
// status Pending); its errors are the API server's, classified as
// client.Client's are.
func TestPodCreatorAnswersWithMetadataOnly(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	var mu sync.Mutex
	var answers []string
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				return resp, err
			}
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			mu.Lock()
			answers = append(answers, string(body))
			mu.Unlock()
			return resp, rerr
		})
	})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := controller.NewPodCreator(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	const image = "registry.example/only-in-the-spec:1"
	build := func() *corev1.Pod {
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{"a": "b"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
		}
	}
	pod := build()
	if err := pc.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The spec (its image) is not in the answer; the metadata's kind is.
	if len(answers) != 1 || strings.Contains(answers[0], image) || !strings.Contains(answers[0], "PartialObjectMetadata") {
		t.Errorf("answers %q, want one of metadata only", answers)
	}
	stored := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored); err != nil {
		t.Fatal(err)
	}
	if pod.UID == "" || pod.UID != stored.UID || pod.ResourceVersion != stored.ResourceVersion ||
		!pod.CreationTimestamp.Equal(&stored.CreationTimestamp) || pod.Labels["a"] != "b" {
		t.Errorf("metadata %+v, stored %+v", pod.ObjectMeta, stored.ObjectMeta)
	}
	if pod.Status.Phase != corev1.PodPending || stored.Status.Phase != corev1.PodPending {
		t.Errorf("phase %q, stored %q, want Pending", pod.Status.Phase, stored.Status.Phase)
	}
	if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Image != image {
		t.Errorf("spec %+v: the built spec is kept", pod.Spec)
	}

	if err := pc.Create(ctx, build()); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}
	bad := build()
	bad.Name = "q"
	bad.Spec.Containers[0].Image = ""
	if err := pc.Create(ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "image") {
		t.Errorf("create without an image: %v, want Invalid naming the image", err)
	}
	dry := build()
	dry.Name = "r"
	if err := pc.Create(ctx, dry, client.DryRunAll); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dry), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("after a dry run: %v, want NotFound (the options reach the API server)", err)
	}
}
