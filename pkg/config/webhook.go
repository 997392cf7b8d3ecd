package config

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Secret managers the pod webhook can inject secrets with.
const (
	SecretManagerKubernetes = "kubernetes"
	SecretManagerVault      = "vault"
)

// WebhookConfig configures the admission webhooks: secret injection into
// task pods and TaskAction admission. The server itself (port, certificate
// directory, HTTP/2) is configured by the top-level webhook* keys.
type WebhookConfig struct {
	// Enabled registers the webhooks and starts the webhook server.
	Enabled bool `json:"enabled"`
	// Standalone runs only the webhook server: no reconciler, no garbage
	// collector, no events or cache clients. It implies Enabled.
	Standalone bool `json:"standalone"`
	// Host is the address the webhook server listens on; empty means all.
	Host string `json:"host"`
	// Namespace of the executor's own objects (the certificate Secret, the
	// webhook Service); empty means POD_NAMESPACE, else the in-cluster
	// namespace, else "default".
	Namespace string `json:"namespace"`
	// ServiceName is the Service in front of the webhook server; the
	// generated certificate is valid for its cluster DNS names.
	ServiceName string `json:"serviceName"`
	// SecretName is the Secret that holds the generated certificate chain
	// when webhookCertPath is empty.
	SecretName string `json:"secretName"`
	// MutatingConfigName and ValidatingConfigName are the executor's own
	// webhook configurations, whose caBundle the generated CA is written to.
	MutatingConfigName   string `json:"mutatingConfigName"`
	ValidatingConfigName string `json:"validatingConfigName"`
	// CertHosts are extra DNS names or IP addresses of the generated
	// certificate, comma-separated (a webhook reached by URL, as in
	// `executor local`). A string keeps Config comparable.
	CertHosts string `json:"certHosts"`

	// SecretManager says how secrets reach task pods: "kubernetes"
	// (references to Kubernetes Secrets) or "vault" (Vault agent annotations).
	SecretManager string `json:"secretManager"`
	// SecretEnvPrefix prefixes the environment variables of ENV_VAR secrets;
	// the task runtime reads it from FLYTE_SECRETS_ENV_PREFIX.
	SecretEnvPrefix string `json:"secretEnvPrefix"`
	// SecretMountDir is where FILE secrets are mounted; the task runtime reads
	// it from FLYTE_SECRETS_DEFAULT_DIR.
	SecretMountDir string `json:"secretMountDir"`
	// Vault configures the Vault agent injector's annotations.
	Vault VaultConfig `json:"vault"`
}

// VaultConfig configures secrets served by the Vault agent injector.
type VaultConfig struct {
	// Role is the Vault Kubernetes-auth role the agent logs in with.
	Role string `json:"role"`
	// KVVersion is the version of the key-value engine: "1" or "2".
	KVVersion string `json:"kvVersion"`
}

// DefaultWebhook is the webhook section's default. The names match
// config/default (namePrefix executor-).
func DefaultWebhook() WebhookConfig {
	return WebhookConfig{
		ServiceName:          "executor-webhook-service",
		SecretName:           "executor-webhook-cert",
		MutatingConfigName:   "executor-mutating-webhook-configuration",
		ValidatingConfigName: "executor-validating-webhook-configuration",
		SecretManager:        SecretManagerKubernetes,
		SecretEnvPrefix:      "_FSEC_",
		SecretMountDir:       "/etc/flyte/secrets",
		Vault:                VaultConfig{Role: "flyte", KVVersion: "2"},
	}
}

// ExtraCertHosts is CertHosts as a list, without empty entries.
func (w WebhookConfig) ExtraCertHosts() []string {
	var out []string
	for _, h := range strings.Split(w.CertHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// Active says whether the webhook server runs.
func (w WebhookConfig) Active() bool { return w.Enabled || w.Standalone }

func bindWebhookFlags(fs *pflag.FlagSet, w *WebhookConfig) {
	p := flagPrefix + "webhook."
	fs.BoolVar(&w.Enabled, p+"enabled", w.Enabled, "serve the admission webhooks (secret injection, TaskAction admission)")
	fs.BoolVar(&w.Standalone, p+"standalone", w.Standalone, "run only the webhook server, without the reconciler")
	fs.StringVar(&w.Host, p+"host", w.Host, "address the webhook server listens on (empty: all addresses; the port is webhookPort)")
	fs.StringVar(&w.Namespace, p+"namespace", w.Namespace, "namespace of the webhook's Secret and Service (else POD_NAMESPACE, in-cluster, default)")
	fs.StringVar(&w.ServiceName, p+"serviceName", w.ServiceName, "Service in front of the webhook server")
	fs.StringVar(&w.SecretName, p+"secretName", w.SecretName, "Secret holding the generated certificate when webhookCertPath is empty")
	fs.StringVar(&w.MutatingConfigName, p+"mutatingConfigName", w.MutatingConfigName, "MutatingWebhookConfiguration that receives the generated CA")
	fs.StringVar(&w.ValidatingConfigName, p+"validatingConfigName", w.ValidatingConfigName, "ValidatingWebhookConfiguration that receives the generated CA")
	fs.StringVar(&w.CertHosts, p+"certHosts", w.CertHosts, "extra DNS names or IPs of the generated certificate, comma-separated")
	fs.StringVar(&w.SecretManager, p+"secretManager", w.SecretManager, "how secrets reach task pods: kubernetes or vault")
	fs.StringVar(&w.SecretEnvPrefix, p+"secretEnvPrefix", w.SecretEnvPrefix, "prefix of the environment variables of ENV_VAR secrets")
	fs.StringVar(&w.SecretMountDir, p+"secretMountDir", w.SecretMountDir, "directory where FILE secrets are mounted")
	fs.StringVar(&w.Vault.Role, p+"vault.role", w.Vault.Role, "Vault role of the agent injector")
	fs.StringVar(&w.Vault.KVVersion, p+"vault.kvVersion", w.Vault.KVVersion, "Vault key-value engine version: 1 or 2")
}

var envPrefixPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (w WebhookConfig) validate() []Problem {
	var ps []Problem
	add := func(key, format string, a ...any) {
		ps = append(ps, Problem{Key: key, Message: fmt.Sprintf(format, a...)})
	}
	if w.Host != "" && net.ParseIP(w.Host) == nil && len(validation.IsDNS1123Subdomain(w.Host)) > 0 {
		add("webhook.host", "%q is neither an IP address nor a host name", w.Host)
	}
	if w.Namespace != "" {
		if msgs := validation.IsDNS1123Label(w.Namespace); len(msgs) > 0 {
			add("webhook.namespace", "%q is not a namespace name", w.Namespace)
		}
	}
	for _, kv := range [][2]string{
		{"webhook.serviceName", w.ServiceName},
		{"webhook.secretName", w.SecretName},
	} {
		if msgs := validation.IsDNS1123Label(kv[1]); len(msgs) > 0 {
			add(kv[0], "%q is not a DNS label", kv[1])
		}
	}
	for _, kv := range [][2]string{
		{"webhook.mutatingConfigName", w.MutatingConfigName},
		{"webhook.validatingConfigName", w.ValidatingConfigName},
	} {
		if kv[1] == "" {
			continue // no configuration receives the CA
		}
		if msgs := validation.IsDNS1123Subdomain(kv[1]); len(msgs) > 0 {
			add(kv[0], "%q is not a DNS subdomain", kv[1])
		}
	}
	for _, h := range w.ExtraCertHosts() {
		if net.ParseIP(h) == nil && len(validation.IsDNS1123Subdomain(h)) > 0 {
			add("webhook.certHosts", "%q is neither an IP address nor a DNS name", h)
		}
	}
	switch w.SecretManager {
	case SecretManagerKubernetes:
	case SecretManagerVault:
		if w.Vault.Role == "" {
			add("webhook.vault.role", "must be set when webhook.secretManager is vault")
		}
	default:
		add("webhook.secretManager", "must be %s or %s, got %q", SecretManagerKubernetes, SecretManagerVault, w.SecretManager)
	}
	if w.Vault.KVVersion != "1" && w.Vault.KVVersion != "2" {
		add("webhook.vault.kvVersion", "must be 1 or 2, got %q", w.Vault.KVVersion)
	}
	if !envPrefixPattern.MatchString(w.SecretEnvPrefix) {
		add("webhook.secretEnvPrefix", "%q is not the start of an environment variable name", w.SecretEnvPrefix)
	}
	if !path.IsAbs(w.SecretMountDir) || path.Clean(w.SecretMountDir) != w.SecretMountDir || w.SecretMountDir == "/" {
		add("webhook.secretMountDir", "%q must be a clean absolute directory other than /", w.SecretMountDir)
	}
	return ps
}
