package chart

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/taskaction/executor/pkg/config"
)

const (
	chartDir  = "../../charts/executor"
	release_  = "executor"
	releaseNS = "executor-system"
	// The Kubernetes version the chart is rendered for: envtest's.
	kubeVersion = "v1.37.2"
)

// vals parses a values document written in YAML.
func vals(t testing.TB, doc string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("values %q: %v", doc, err)
	}
	return m
}

func kubeVersionT(t testing.TB) *common.KubeVersion {
	t.Helper()
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// rendered is one release rendered the way `helm install --dry-run` renders it.
type rendered struct {
	objs  []*unstructured.Unstructured
	notes string
}

// render renders the chart with Helm's install action, client-side only.
func render(t testing.TB, values map[string]any) rendered {
	t.Helper()
	r, err := renderErr(t, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

func renderErr(t testing.TB, values map[string]any) (rendered, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	inst := action.NewInstall(action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler)))
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = release_
	inst.Namespace = releaseNS
	inst.KubeVersion = kubeVersionT(t)
	rel, err := inst.Run(ch, values)
	if err != nil {
		return rendered{}, err
	}
	r := rel.(*release.Release)
	objs, err := decodeAll(r.Manifest)
	if err != nil {
		t.Fatalf("rendered manifest does not parse: %v\n%s", err, r.Manifest)
	}
	return rendered{objs: objs, notes: r.Info.Notes}, nil
}

// decodeAll reads every object of a multi-document YAML stream.
func decodeAll(s string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func readObjects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(string(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs
}

// lint runs `helm lint --strict` through the SDK: any warning or error fails.
func lint(t testing.TB, values map[string]any) {
	t.Helper()
	l := action.NewLint()
	l.Strict = true
	l.Namespace = releaseNS
	l.KubeVersion = kubeVersionT(t)
	res := l.Run([]string{chartDir}, values)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m.Error())
		}
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint: %v", err)
	}
	if res.TotalChartsLinted != 1 {
		t.Errorf("helm lint linted %d charts, want 1", res.TotalChartsLinted)
	}
}

// find returns the rendered objects of kind (and name, if not empty).
func (r rendered) find(kind, name string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			out = append(out, o)
		}
	}
	return out
}

func (r rendered) one(t testing.TB, kind, name string) *unstructured.Unstructured {
	t.Helper()
	got := r.find(kind, name)
	if len(got) != 1 {
		t.Fatalf("want one %s %q, got %d", kind, name, len(got))
	}
	return got[0]
}

// configFile writes the rendered ConfigMap's config.yaml and loads it as the
// executor would (config.Load: defaults, the file, validation).
func (r rendered) configFile(t testing.TB) (string, config.Config) {
	t.Helper()
	cm := r.one(t, "ConfigMap", release_+"-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	// The executor checks the webhook certificate's files at start; in the pod
	// they are the mounted Secret, here a pair made for the test.
	const mounted = "/etc/executor/webhook-certs"
	text := data
	if strings.Contains(text, "webhookCertPath: "+mounted+"\n") {
		text = strings.Replace(text, "webhookCertPath: "+mounted+"\n", "webhookCertPath: "+certDir(t)+"\n", 1)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatalf("the rendered configuration does not load: %v\n%s", err, data)
	}
	if text != data {
		cfg.WebhookCertPath = mounted
	}
	return data, cfg
}

// certDir holds a self-signed tls.crt and tls.key.
func certDir(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(4102444800, 0), DNSNames: []string{"test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, blk := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func get(t testing.TB, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s %s: no %s", o.GetKind(), o.GetName(), strings.Join(path, "."))
	}
	return v
}

// warnings collects the API server's warning headers (PodSecurity's among them).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// dryRun applies every object server-side with dryRun=All, as `helm install`
// (server-side apply) would, so the API server validates each one, admission
// included; and fails on any warning it answers with.
func dryRun(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	c, w := apiClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w.take()
	for _, o := range objs {
		o := o.DeepCopy()
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("helm"), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			t.Errorf("dry run of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		for _, msg := range w.take() {
			t.Errorf("dry run of %s %s/%s: warning: %s", o.GetKind(), o.GetNamespace(), o.GetName(), msg)
		}
	}
}

// apply applies objects for real (RBAC checks need them in place).
func apply(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	c, _ := apiClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, o := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

var (
	clientOnce sync.Once
	apiC       client.Client
	apiW       = &warnings{}
	clientErr  error
)

func apiClient(t testing.TB) (client.Client, *warnings) {
	t.Helper()
	clientOnce.Do(func() {
		cfg := rest.CopyConfig(env.Config)
		cfg.WarningHandler = apiW
		apiC, clientErr = client.New(cfg, client.Options{})
	})
	if clientErr != nil {
		t.Fatal(clientErr)
	}
	return apiC, apiW
}

// sameValue compares a value of values.yaml with the executor's printed one:
// durations by their length, numbers by their value, empty mappings and lists
// as absent.
func sameValue(a, b any) bool {
	if isEmpty(a) && isEmpty(b) {
		return true
	}
	if as, ok := a.(string); ok {
		if bs, ok := b.(string); ok {
			ad, aerr := time.ParseDuration(as)
			bd, berr := time.ParseDuration(bs)
			if aerr == nil && berr == nil {
				return ad == bd
			}
			return as == bs
		}
	}
	return fmt.Sprint(normalize(a)) == fmt.Sprint(normalize(b))
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

func normalize(v any) any {
	switch v := v.(type) {
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case float32:
		return float64(v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b bytes.Buffer
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%v;", k, normalize(v[k]))
		}
		return b.String()
	}
	return v
}
