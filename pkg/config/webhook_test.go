package config

import (
	"strings"
	"testing"
)

func TestWebhookValidation(t *testing.T) {
	cases := []struct {
		name string
		set  func(*WebhookConfig)
		want string // "" means valid
	}{
		{"defaults", func(*WebhookConfig) {}, ""},
		{"vault", func(w *WebhookConfig) { w.SecretManager = SecretManagerVault }, ""},
		{"extra hosts", func(w *WebhookConfig) { w.CertHosts = "127.0.0.1, localhost" }, ""},
		{"no configuration to patch", func(w *WebhookConfig) { w.MutatingConfigName, w.ValidatingConfigName = "", "" }, ""},
		{"unknown manager", func(w *WebhookConfig) { w.SecretManager = "aws" }, `webhook.secretManager: must be kubernetes or vault, got "aws"`},
		{"vault without role", func(w *WebhookConfig) { w.SecretManager, w.Vault.Role = SecretManagerVault, "" }, "webhook.vault.role: must be set when webhook.secretManager is vault"},
		{"kv version", func(w *WebhookConfig) { w.Vault.KVVersion = "3" }, `webhook.vault.kvVersion: must be 1 or 2, got "3"`},
		{"env prefix", func(w *WebhookConfig) { w.SecretEnvPrefix = "1-BAD" }, "webhook.secretEnvPrefix"},
		{"relative mount dir", func(w *WebhookConfig) { w.SecretMountDir = "etc/secrets" }, "webhook.secretMountDir"},
		{"root mount dir", func(w *WebhookConfig) { w.SecretMountDir = "/" }, "webhook.secretMountDir"},
		{"service name", func(w *WebhookConfig) { w.ServiceName = "Web_Hook" }, "webhook.serviceName"},
		{"secret name", func(w *WebhookConfig) { w.SecretName = "" }, "webhook.secretName"},
		{"namespace", func(w *WebhookConfig) { w.Namespace = "Not A Namespace" }, "webhook.namespace"},
		{"config name", func(w *WebhookConfig) { w.MutatingConfigName = "UPPER" }, "webhook.mutatingConfigName"},
		{"cert host", func(w *WebhookConfig) { w.CertHosts = "ok.example, not a host" }, "webhook.certHosts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.set(&c.Webhook)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestWebhookStandaloneImpliesActive(t *testing.T) {
	w := DefaultWebhook()
	if w.Active() {
		t.Error("the webhook is off by default")
	}
	w.Standalone = true
	if !w.Active() {
		t.Error("standalone does not serve the webhook")
	}
}
