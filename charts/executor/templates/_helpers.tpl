{{/* The chart's name, or nameOverride. */}}
{{- define "executor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name: the release's name when it contains the chart's. */}}
{{- define "executor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "executor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "executor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
control-plane: controller-manager
{{- end }}

{{- define "executor.labels" -}}
{{ include "executor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "executor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-controller-manager" (include "executor.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "executor.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The port of a host:port bind address; empty when the address is "0" (off). */}}
{{- define "executor.port" -}}
{{- if and . (ne (toString .) "0") }}
{{- $port := regexFind "[0-9]+$" (toString .) }}
{{- required (printf "bind address %q has no port" (toString .)) $port }}
{{- end }}
{{- end }}

{{/* "true" when the admission webhooks are served. */}}
{{- define "executor.webhookOn" -}}
{{- $w := .Values.config.executor.webhook }}
{{- if or $w.enabled $w.standalone }}true{{ end }}
{{- end }}

{{/* "true" when the executor generates its own webhook certificate (no webhookCertPath, no cert-manager). */}}
{{- define "executor.selfSignedCerts" -}}
{{- if and (include "executor.webhookOn" .) (not .Values.webhook.certManager.enabled) (not .Values.config.executor.webhookCertPath) }}true{{ end }}
{{- end }}

{{/* Where the cert-manager certificate is mounted: webhookCertPath, or the chart's default. */}}
{{- define "executor.webhookCertPath" -}}
{{- default "/etc/executor/webhook-certs" .Values.config.executor.webhookCertPath }}
{{- end }}

{{- define "executor.certManagerSecret" -}}
{{- printf "%s-webhook-server-cert" (include "executor.fullname" .) }}
{{- end }}

{{- define "executor.certificateName" -}}
{{- printf "%s-webhook-serving-cert" (include "executor.fullname" .) }}
{{- end }}

{{/* The effective configuration file: config, with webhookCertPath pointing at the cert-manager mount. */}}
{{- define "executor.configFile" -}}
{{- $cfg := deepCopy .Values.config }}
{{- if and (include "executor.webhookOn" .) .Values.webhook.certManager.enabled }}
{{- $_ := set $cfg.executor "webhookCertPath" (include "executor.webhookCertPath" .) }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* Namespace of the leader-election Lease: leaderElectionNamespace, else the pod's own. */}}
{{- define "executor.leaseNamespace" -}}
{{- default .Release.Namespace .Values.config.executor.leaderElectionNamespace }}
{{- end }}

{{/* Checks of values the executor cannot check itself, since they are about the chart's objects. */}}
{{- define "executor.validate" -}}
{{- $w := .Values.config.executor.webhook }}
{{- if and $w.namespace (ne $w.namespace .Release.Namespace) }}
{{- fail (printf "config.executor.webhook.namespace %q must be empty or the release's namespace %q: the webhook Service selects the executor's pods there" $w.namespace .Release.Namespace) }}
{{- end }}
{{- if include "executor.webhookOn" . }}
{{- if not (and $w.serviceName $w.mutatingConfigName $w.validatingConfigName) }}
{{- fail "config.executor.webhook.serviceName, mutatingConfigName and validatingConfigName name the chart's webhook objects: none may be empty while the webhooks are on" }}
{{- end }}
{{- end }}
{{- if and .Values.webhook.certManager.enabled .Values.config.executor.webhookCertPath (not (hasPrefix "/" .Values.config.executor.webhookCertPath)) }}
{{- fail "config.executor.webhookCertPath must be an absolute path" }}
{{- end }}
{{- if and (gt (int .Values.replicas) 1) (not .Values.config.executor.leaderElect) (not $w.standalone) }}
{{- fail "replicas > 1 needs config.executor.leaderElect: true (else every replica reconciles)" }}
{{- end }}
{{- end }}

{{/* A webhook's namespaceSelector: the executor's namespaces, when it has a list (else every namespace). */}}
{{- define "executor.webhookNamespaces" -}}
{{- if . }}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: In
      values:
        {{- toYaml . | nindent 8 }}
{{- end }}
{{- end }}

{{/* The rules on TaskActions, pods, ConfigMaps, events and the engines' objects (config/rbac/role.yaml's ClusterRole, without the webhook's). */}}
{{- define "executor.rules.workload" }}
- apiGroups: [""]
  resources: [pods]
  verbs: [create, delete, get, list, watch]
# The sleep plugin's attempts are ConfigMaps.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [create, delete, get, list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [flyte.org]
  resources: [taskactions]
  verbs: [delete, get, list, patch, watch]
- apiGroups: [flyte.org]
  resources: [taskactions/finalizers]
  verbs: [update]
- apiGroups: [flyte.org]
  resources: [taskactions/status]
  verbs: [patch]
# The engine plugins' objects (docs/engines): watched only once a task needs
# them and the cluster serves them.
- apiGroups: [jobset.x-k8s.io]
  resources: [jobsets]
  verbs: [create, delete, get, list, watch]
- apiGroups: [kubeflow.org]
  resources: [mpijobs, pytorchjobs, tfjobs]
  verbs: [create, delete, get, list, watch]
- apiGroups: [kubernetes.dask.org]
  resources: [daskjobs]
  verbs: [create, delete, get, list, watch]
- apiGroups: [ray.io]
  resources: [rayjobs]
  verbs: [create, delete, get, list, watch]
- apiGroups: [sparkoperator.k8s.io]
  resources: [sparkapplications]
  verbs: [create, delete, get, list, watch]
{{- end }}
