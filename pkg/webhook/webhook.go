// Package webhook is the executor's admission webhook server: secret
// injection into task pods, and TaskAction admission (the finalizer at
// create, and the errors CEL cannot give).
//
// Failure policies: the pod webhook fails closed (a pod that needs secrets
// is not created without them); the TaskAction webhooks fail open (a create
// succeeds without them, and the reconciler adds the finalizer and reports
// an invalid spec itself). Timeouts are a few seconds (config/webhook).
package webhook

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/lazylog"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/secrets"
	"github.com/taskaction/executor/pkg/webhook/certs"
)

// Paths of the webhooks. The pod path is the one Flyte's configuration uses.
const (
	PathPodSecrets         = "/mutate--v1-pod"
	PathTaskActionDefault  = "/mutate-flyte-org-v1-taskaction"
	PathTaskActionValidate = "/validate-flyte-org-v1-taskaction"
)

// The webhook reads and writes its certificate Secret, in its own namespace
// only (a Role), and the caBundle of its own configurations; it reads no
// other Secret.
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,resourceNames=executor-webhook-cert,verbs=get;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=executor-mutating-webhook-configuration;executor-validating-webhook-configuration,verbs=get;patch

// Options are the parts of the webhooks that are not configuration.
type Options struct {
	// ValidateTaskAction, if set, is an extra check of a TaskAction that
	// passed the built-in ones; its error is shown at `kubectl apply`.
	// The decode of Flyte's template bytes (pkg/task) plugs in here.
	ValidateTaskAction func(*flytev1.TaskAction) error
}

// Server is the webhook server with its certificate source.
type Server struct {
	crwebhook.Server
	// selfSigned serves the generated chain; nil when a directory is given.
	selfSigned *certs.SelfSigned
}

// NewServer builds the webhook server of cfg: HTTP/1.1 only unless
// enableHTTP2 (tlsOpts carries that), the certificate from webhookCertPath
// (reloaded when its files change), else a generated one (see Register).
func NewServer(cfg config.Config, tlsOpts []func(*tls.Config)) *Server {
	opts := crwebhook.Options{Host: cfg.Webhook.Host, Port: cfg.WebhookPort, TLSOpts: append([]func(*tls.Config){}, tlsOpts...)}
	s := &Server{}
	if cfg.WebhookCertPath != "" {
		// controller-runtime watches these files and serves the new pair
		// when cert-manager (or anyone) replaces them.
		opts.CertDir = cfg.WebhookCertPath
		opts.CertName = cfg.WebhookCertName
		opts.KeyName = cfg.WebhookCertKey
	} else {
		s.selfSigned = &certs.SelfSigned{}
		opts.TLSOpts = append(opts.TLSOpts, s.selfSigned.TLSOption)
	}
	s.Server = crwebhook.NewServer(opts)
	return s
}

// SelfSigned is the generated-certificate source, or nil when the server
// serves a given directory.
func (s *Server) SelfSigned() *certs.SelfSigned { return s.selfSigned }

// Register adds the webhooks to srv, which must be mgr's webhook server, and
// the generated certificate's upkeep to mgr. It does nothing unless the
// webhook is enabled.
func Register(mgr manager.Manager, srv *Server, cfg config.Config, opts Options) error {
	if !cfg.Webhook.Active() {
		return nil
	}
	if mgr.GetWebhookServer() != srv {
		return fmt.Errorf("the manager's webhook server was not built by webhook.NewServer")
	}
	inj, err := NewInjector(cfg.Webhook)
	if err != nil {
		return err
	}
	if ss := srv.selfSigned; ss != nil {
		// A direct client: the manager's would cache every Secret of the cluster.
		c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("client for the webhook certificate: %w", err)
		}
		ns := Namespace(cfg.Webhook)
		ss.Client = c
		ss.Secret = types.NamespacedName{Namespace: ns, Name: cfg.Webhook.SecretName}
		ss.Hosts = CertHosts(cfg.Webhook, ns)
		ss.MutatingConfig = cfg.Webhook.MutatingConfigName
		ss.ValidatingConfig = cfg.Webhook.ValidatingConfigName
		ss.Log = mgr.GetLogger().WithName("webhook-certs")
		if err := mgr.Add(ss); err != nil {
			return fmt.Errorf("add webhook certificate: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhook-certificate", ss.Checker); err != nil {
			return fmt.Errorf("add webhook ready check: %w", err)
		}
	}
	if err := mgr.AddReadyzCheck("webhook", srv.StartedChecker()); err != nil {
		return fmt.Errorf("add webhook ready check: %w", err)
	}
	srv.Register(PathPodSecrets, &admission.Webhook{Handler: &PodSecretInjector{Injector: inj}, RecoverPanic: ptr(true), LogConstructor: requestLogger})
	validator := TaskActionValidator{Extra: opts.ValidateTaskAction}
	// The TaskAction webhooks are called for every create: their reviews are
	// decoded in one pass (reviewHandler).
	log := mgr.GetLogger().WithName("admission")
	srv.Register(PathTaskActionDefault, reviewHandler{handler: TaskActionAdmission{Validator: validator}, log: log.WithValues("webhook", PathTaskActionDefault)})
	srv.Register(PathTaskActionValidate, reviewHandler{handler: validator, log: log.WithValues("webhook", PathTaskActionValidate)})
	return nil
}

func ptr[T any](v T) *T { return &v }

// NewInjector is the secret manager cfg selects.
func NewInjector(w config.WebhookConfig) (secrets.Injector, error) {
	switch w.SecretManager {
	case config.SecretManagerKubernetes:
		return secrets.Kubernetes{EnvPrefix: w.SecretEnvPrefix, MountDir: w.SecretMountDir}, nil
	case config.SecretManagerVault:
		return secrets.Vault{Role: w.Vault.Role, KVVersion: w.Vault.KVVersion, MountDir: w.SecretMountDir}, nil
	}
	return nil, fmt.Errorf("unknown secret manager %q", w.SecretManager)
}

const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Namespace is where the webhook's Secret and Service live: the configured
// namespace, else $POD_NAMESPACE, else the pod's own, else "default".
func Namespace(w config.WebhookConfig) string {
	if w.Namespace != "" {
		return w.Namespace
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

// CertHosts are the names the generated certificate is valid for: the
// Service's cluster names (the API server calls <svc>.<ns>.svc) and the
// configured extra hosts.
func CertHosts(w config.WebhookConfig, ns string) []string {
	svc := w.ServiceName
	hosts := []string{svc + "." + ns + ".svc", svc, svc + "." + ns, svc + "." + ns + ".svc.cluster.local"}
	return append(hosts, w.ExtraCertHosts()...)
}

// requestLogger is controller-runtime's logger of one admission request, its
// values encoded only if the request logs.
func requestLogger(base logr.Logger, req *admission.Request) logr.Logger {
	return admission.DefaultLogConstructor(lazylog.New(base), req)
}
