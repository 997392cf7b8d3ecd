// Package configtest holds the bad-configuration matrix: inputs (a file body
// and flags) with the exact error each must produce. pkg/config's tests check
// config.Load against it; cmd/executor's check that `executor config` (the dry
// run) and the real start give the same answer for every row.
package configtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FilePlaceholder in Case.Want stands for the path of the case's file.
const FilePlaceholder = "<file>"

// Case is one configuration input.
type Case struct {
	Name string
	// File is the body of the --config file; empty: no file.
	File string
	// Args are flags, as on the command line.
	Args []string
	// Want is the exact error of config.Load (without the command's
	// "invalid configuration: " prefix); empty: the input is valid.
	Want string
}

// Certs are certificate directories for the cert-path rows.
type Certs struct {
	Good, NotPEM, Empty, CertOnly, KeyMismatch string
}

// NewCerts writes the directories under t.TempDir().
func NewCerts(t testing.TB) Certs {
	t.Helper()
	certPEM, keyPEM := selfSigned(t)
	_, otherKey := selfSigned(t)
	c := Certs{}
	for _, d := range []struct {
		dir        *string
		cert, key  []byte
		leaveEmpty bool
	}{
		{&c.Good, certPEM, keyPEM, false},
		{&c.NotPEM, []byte("not a certificate\n"), []byte("not a key\n"), false},
		{&c.Empty, nil, nil, true},
		{&c.CertOnly, certPEM, nil, false},
		{&c.KeyMismatch, certPEM, otherKey, false},
	} {
		*d.dir = t.TempDir()
		if d.leaveEmpty {
			continue
		}
		write(t, filepath.Join(*d.dir, "tls.crt"), d.cert)
		if d.key != nil {
			write(t, filepath.Join(*d.dir, "tls.key"), d.key)
		}
	}
	return c
}

// Matrix is every bad input the configuration must refuse, each with its exact
// message, and good inputs that must load (Want empty).
func Matrix(c Certs) []Case {
	const hotLoop = "requeueDuration: must be at least 1s (shorter requeues make a hot loop), got "
	const lapse = "requeueDuration: must be at most 15s, got %s: it is also the cache reservation heartbeat, and a reservation lapses 30s after its last renewal"
	const dns1123 = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	const notPositive = ` is not positive (use a quantity such as "500m" or "1Gi", or "" for no default)`
	const noGrace = ` (there is no "no grace" value: use a short period such as 1s)`
	flyteFile := `# a file shared with the other components of a Flyte deployment
logger:
  level: 4
  show-source: true
webhook:
  certDir: /var/run/flyte/certs
  serviceName: flyte-webhook
storage:
  type: minio
  container: flyte-data
plugins:
  k8s:
    default-cpus: 500m
tasks:
  task-plugins:
    default-for-task-types:
      python: container
runs:
  server:
    port: 8090
executor:
  EventsServiceURL: http://flyte-http.flyte:8090
  cacheServiceURL: http://flyte-http.flyte:8090
  maxConcurrentReconciles: 512
  gc:
    interval: 1h
    maxTTL: 24h
`
	rl := func(s string) string { return strings.Replace(lapse, "%s", s, 1) }
	return []Case{
		// requeueDuration: the reconcile period and the reservation heartbeat.
		{Name: "requeueDuration below 1s", Args: []string{"--executor.requeueDuration=500ms"}, Want: hotLoop + "500ms"},
		{Name: "requeueDuration 0 (flag)", Args: []string{"--executor.requeueDuration=0s"}, Want: hotLoop + "0s"},
		{Name: "requeueDuration 0 (file)", File: "executor:\n  requeueDuration: 0\n", Want: hotLoop + "0s"},
		{Name: "requeueDuration negative", File: "executor:\n  requeueDuration: -5s\n", Want: hotLoop + "-5s"},
		{Name: "requeueDuration above the reservation margin", Args: []string{"--executor.requeueDuration=16s"}, Want: rl("16s")},
		{Name: "requeueDuration of an hour", File: "executor:\n  requeueDuration: 1h\n", Want: rl("1h0m0s")},
		{Name: "requeueDuration not a duration (file)", File: "executor:\n  requeueDuration: soon\n",
			Want: `config file <file>: requeueDuration: invalid duration "soon": use Go syntax such as "90s" or "30m"`},
		{Name: "requeueDuration not a duration (flag)", Args: []string{"--executor.requeueDuration=soon"},
			Want: `invalid argument "soon" for "--executor.requeueDuration" flag: must be a duration like "30s" or "5m"`},

		// defaultCPU / defaultMemory: "" is "no default".
		{Name: "defaultCPU -1", Args: []string{"--executor.defaultCPU=-1"}, Want: `defaultCPU: "-1"` + notPositive},
		{Name: "defaultCPU 0", File: "executor:\n  defaultCPU: \"0\"\n", Want: `defaultCPU: "0"` + notPositive},
		{Name: "defaultMemory -1Gi", File: "executor:\n  defaultMemory: -1Gi\n", Want: `defaultMemory: "-1Gi"` + notPositive},
		{Name: "defaultCPU not a quantity", Args: []string{"--executor.defaultCPU=lots"},
			Want: `defaultCPU: "lots" is not a resource quantity (such as "500m" or "1Gi"; "" for no default)`},
		{Name: "defaultCPU as a negative number in the file", File: "executor:\n  defaultCPU: -2\n", Want: `defaultCPU: "-2"` + notPositive},
		{Name: "defaultMemory as a boolean (false is \"0\", as Flyte reads it)", File: "executor:\n  defaultMemory: false\n",
			Want: `defaultMemory: "0"` + notPositive},
		{Name: "defaultMemory as a list", File: "executor:\n  defaultMemory: [1Gi]\n",
			Want: "config file <file>: defaultMemory must be a string, got a list"},

		// Grace periods: 0 used to mean 3 minutes.
		{Name: "imagePullGracePeriod 0 (file)", File: "executor:\n  imagePullGracePeriod: 0\n", Want: "imagePullGracePeriod: must be positive, got 0s" + noGrace},
		{Name: "imagePullGracePeriod 0s (flag)", Args: []string{"--executor.imagePullGracePeriod=0s"}, Want: "imagePullGracePeriod: must be positive, got 0s" + noGrace},
		{Name: "imagePullGracePeriod negative", Args: []string{"--executor.imagePullGracePeriod=-1s"}, Want: "imagePullGracePeriod: must be positive, got -1s" + noGrace},
		{Name: "createContainerGracePeriod 0", File: "executor:\n  createContainerGracePeriod: 0s\n", Want: "createContainerGracePeriod: must be positive, got 0s" + noGrace},
		{Name: "queuedStatusDelay negative", Args: []string{"--executor.queuedStatusDelay=-1s"}, Want: "queuedStatusDelay: must be between 0 (write Queued at once) and 1m0s, got -1s"},
		{Name: "queuedStatusDelay too long", File: "executor:\n  queuedStatusDelay: 10m\n", Want: "queuedStatusDelay: must be between 0 (write Queued at once) and 1m0s, got 10m0s"},
		{Name: "saturatedStatusDelay negative", Args: []string{"--executor.saturatedStatusDelay=-1s"}, Want: "saturatedStatusDelay: must be between 0 (no longer than queuedStatusDelay) and 30m0s, got -1s"},
		{Name: "saturatedStatusDelay too long", File: "executor:\n  saturatedStatusDelay: 1h\n", Want: "saturatedStatusDelay: must be between 0 (no longer than queuedStatusDelay) and 30m0s, got 1h0m0s"},
		{Name: "executingStatusDelay negative", Args: []string{"--executor.executingStatusDelay=-1s"}, Want: "executingStatusDelay: must be between 0 (write Executing at once) and 30m0s, got -1s"},
		{Name: "executingStatusDelay too long", File: "executor:\n  executingStatusDelay: 1h\n", Want: "executingStatusDelay: must be between 0 (write Executing at once) and 30m0s, got 1h0m0s"},

		// maxSystemFailures: stored as int32 by the controller.
		{Name: "maxSystemFailures negative (file)", File: "executor:\n  maxSystemFailures: -1\n", Want: "maxSystemFailures: must be between 0 and 100, got -1"},
		{Name: "maxSystemFailures negative (flag)", Args: []string{"--executor.maxSystemFailures=-2"}, Want: "maxSystemFailures: must be between 0 and 100, got -2"},
		{Name: "maxSystemFailures 101", Args: []string{"--executor.maxSystemFailures=101"}, Want: "maxSystemFailures: must be between 0 and 100, got 101"},
		{Name: "maxSystemFailures beyond int32", File: "executor:\n  maxSystemFailures: 4294967296\n", Want: "maxSystemFailures: must be between 0 and 100, got 4294967296"},
		{Name: "maxSystemFailures not a number", File: "executor:\n  maxSystemFailures: three\n", Want: `config file <file>: maxSystemFailures must be an integer, got "three"`},

		// kubeAPIQPS / kubeAPIBurst.
		{Name: "kubeAPIQPS NaN", Args: []string{"--executor.kubeAPIQPS=NaN"}, Want: "kubeAPIQPS: must be a positive finite number, got NaN"},
		{Name: "kubeAPIQPS +Inf", Args: []string{"--executor.kubeAPIQPS=+Inf"}, Want: "kubeAPIQPS: must be a positive finite number, got +Inf"},
		{Name: "kubeAPIQPS -Inf", Args: []string{"--executor.kubeAPIQPS=-Inf"}, Want: "kubeAPIQPS: must be a positive finite number, got -Inf"},
		{Name: "kubeAPIQPS 0", File: "executor:\n  kubeAPIQPS: 0\n", Want: "kubeAPIQPS: must be a positive finite number, got 0"},
		{Name: "kubeAPIQPS .nan in the file", File: "executor:\n  kubeAPIQPS: .nan\n", Want: "kubeAPIQPS: must be a positive finite number, got NaN"},
		{Name: "kubeAPIBurst 0", Args: []string{"--executor.kubeAPIBurst=0"}, Want: "kubeAPIBurst: must be at least 1, got 0"},

		// maxConcurrentReconciles.
		{Name: "maxConcurrentReconciles 0", Args: []string{"--executor.maxConcurrentReconciles=0"}, Want: "maxConcurrentReconciles: must be between 1 and 1024, got 0"},
		{Name: "maxConcurrentReconciles 1025", File: "executor:\n  maxConcurrentReconciles: 1025\n", Want: "maxConcurrentReconciles: must be between 1 and 1024, got 1025"},
		{Name: "maxConcurrentReconciles 100000", Args: []string{"--executor.maxConcurrentReconciles=100000"}, Want: "maxConcurrentReconciles: must be between 1 and 1024, got 100000"},

		// Service URLs, from the file and from flags.
		{Name: "eventsServiceURL without scheme (flag)", Args: []string{"--executor.eventsServiceURL=localhost:8090"},
			Want: `eventsServiceURL: "localhost:8090" has no scheme: write it as "http://localhost:8090" (or https)`},
		{Name: "eventsServiceURL without scheme (file)", File: "executor:\n  eventsServiceURL: events.flyte.svc\n",
			Want: `eventsServiceURL: "events.flyte.svc" has no scheme: write it as "http://events.flyte.svc" (or https)`},
		{Name: "eventsServiceURL scheme-relative", Args: []string{"--executor.eventsServiceURL=//events:8090"},
			Want: `eventsServiceURL: "//events:8090" has no scheme: write it as "http://events:8090" (or https)`},
		{Name: "eventsServiceURL without host", File: "executor:\n  eventsServiceURL: http://\n", Want: `eventsServiceURL: "http://" has no host`},
		{Name: "eventsServiceURL with another scheme", Args: []string{"--executor.eventsServiceURL=grpc://events:8090"},
			Want: `eventsServiceURL: "grpc://events:8090": the scheme must be http or https, not "grpc"`},
		{Name: "eventsServiceURL with a query", Args: []string{"--executor.eventsServiceURL=http://events:8090/?x=1"},
			Want: `eventsServiceURL: "http://events:8090/?x=1" must not have a query or a fragment`},
		{Name: "cacheServiceURL without scheme (flag)", Args: []string{"--executor.cacheServiceURL=cache:8094"},
			Want: `cacheServiceURL: "cache:8094" has no scheme: write it as "http://cache:8094" (or https)`},
		{Name: "cacheServiceURL with a space", File: "executor:\n  cacheServiceURL: \"http://exa mple\"\n",
			Want: `cacheServiceURL: "http://exa mple" is not a URL: invalid character " " in host name`},

		// Leader election, namespaces, service account.
		{Name: "leaderElectionNamespace not DNS-1123", Args: []string{"--executor.leaderElectionNamespace=Bad_NS"},
			Want: `leaderElectionNamespace: "Bad_NS" is not a namespace name: ` + dns1123},
		{Name: "leaderElectionNamespace too long", File: "executor:\n  leaderElectionNamespace: " + strings.Repeat("a", 64) + "\n",
			Want: `leaderElectionNamespace: "` + strings.Repeat("a", 64) + `" is not a namespace name: must be no more than 63 characters`},
		{Name: "namespaces with a bad name (flag)", Args: []string{"--executor.namespaces=team-a,Team_B"},
			Want: `namespaces: "Team_B" is not a namespace name: ` + dns1123},
		{Name: "namespaces with a name twice (file)", File: "executor:\n  namespaces: [team-a, team-b, team-a]\n",
			Want: `namespaces: "team-a" is listed twice`},
		{Name: "namespaces as a mapping", File: "executor:\n  namespaces: {team-a: x}\n",
			Want: "config file <file>: namespaces[0] must be a string, got a mapping"},
		{Name: "namespaces as a string with a space after the comma (split on \",\" only, as Flyte does)", File: "executor:\n  namespaces: team-a, team-b\n",
			Want: `namespaces: " team-b" is not a namespace name: ` + dns1123},
		{Name: "defaultK8sServiceAccount not a name", Args: []string{"--executor.defaultK8sServiceAccount=Task Runner"},
			Want: `defaultK8sServiceAccount: "Task Runner" is not a service account name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},

		// Listen addresses.
		{Name: "metrics and probes on one address", Args: []string{"--executor.metricsBindAddress=:8081"},
			Want: "healthProbeBindAddress: port 8081 is also metricsBindAddress's; the servers need different ports"},
		{Name: "metrics on all interfaces, probes on loopback, same port", File: "executor:\n  metricsBindAddress: \":9000\"\n  healthProbeBindAddress: 127.0.0.1:9000\n",
			Want: "healthProbeBindAddress: port 9000 is also metricsBindAddress's; the servers need different ports"},
		{Name: "probes on the port of the served webhooks", Args: []string{"--executor.webhook.enabled=true", "--executor.healthProbeBindAddress=:9443"},
			Want: "webhookPort: port 9443 is also healthProbeBindAddress's; the servers need different ports"},
		{Name: "metrics on the webhook port, standalone webhook", File: "executor:\n  webhookPort: 10254\n  webhook:\n    standalone: true\n",
			Want: "webhookPort: port 10254 is also metricsBindAddress's; the servers need different ports"},
		{Name: "webhook secret manager unknown", Args: []string{"--executor.webhook.secretManager=aws"},
			Want: `webhook.secretManager: must be kubernetes or vault, got "aws"`},
		{Name: "webhook host not a host", Args: []string{"--executor.webhook.host=not a host"},
			Want: `webhook.host: "not a host" is neither an IP address nor a host name`},
		{Name: "profiles on the metrics port", Args: []string{"--executor.pprofBindAddress=:10254"},
			Want: "pprofBindAddress: port 10254 is also metricsBindAddress's; the servers need different ports"},
		{Name: "bind address without a colon", Args: []string{"--executor.healthProbeBindAddress=8081"},
			Want: `healthProbeBindAddress: "8081" is not host:port (or "0" to disable)`},
		{Name: "bind address with a bad port", Args: []string{"--executor.metricsBindAddress=:99999"},
			Want: `metricsBindAddress: ":99999" has an invalid port`},
		{Name: "webhookPort out of range", Args: []string{"--executor.webhookPort=70000"}, Want: "webhookPort: must be between 1 and 65535, got 70000"},

		// Certificate directories: the pair must load as the server would load it.
		{Name: "webhookCertPath with files that are not PEM", Args: []string{"--executor.webhookCertPath=" + c.NotPEM},
			Want: "webhookCertPath: " + c.NotPEM + "/tls.crt and tls.key are not a PEM certificate and its private key: tls: failed to find any PEM data in certificate input"},
		{Name: "webhookCertPath empty", Args: []string{"--executor.webhookCertPath=" + c.Empty},
			Want: "webhookCertPath: " + c.Empty + "/tls.crt is not readable: no such file or directory"},
		{Name: "webhookCertPath without the key", File: "executor:\n  webhookCertPath: " + c.CertOnly + "\n",
			Want: "webhookCertPath: " + c.CertOnly + "/tls.key is not readable: no such file or directory"},
		{Name: "webhookCertPath with a key of another certificate", Args: []string{"--executor.webhookCertPath=" + c.KeyMismatch},
			Want: "webhookCertPath: " + c.KeyMismatch + "/tls.crt and tls.key are not a PEM certificate and its private key: tls: private key does not match public key"},
		{Name: "webhookCertName naming a missing file", Args: []string{"--executor.webhookCertPath=" + c.Good, "--executor.webhookCertName=srv.crt"},
			Want: "webhookCertPath: " + c.Good + "/srv.crt is not readable: no such file or directory"},
		{Name: "webhookCertName empty", Args: []string{"--executor.webhookCertPath=" + c.Good, "--executor.webhookCertName="},
			Want: "webhookCertPath: " + c.Good + " is a directory, not a PEM file"},
		{Name: "metricsCertPath with files that are not PEM", Args: []string{"--executor.metricsCertPath=" + c.NotPEM},
			Want: "metricsCertPath: " + c.NotPEM + "/tls.crt and tls.key are not a PEM certificate and its private key: tls: failed to find any PEM data in certificate input"},

		// Garbage collector.
		{Name: "gc enabled without maxTTL (file)", File: "executor:\n  gc:\n    interval: 5m\n    maxTTL: 0s\n", Want: "gc.maxTTL must be positive when gc is enabled"},
		{Name: "gc negative maxTTL (flag)", Args: []string{"--executor.gc.maxTTL=-1h"}, Want: "gc.maxTTL must be positive when gc is enabled"},
		{Name: "gc negative interval", Args: []string{"--executor.gc.interval=-1m"}, Want: "gc.interval: must be 0 (gc disabled) or at least 1m0s (each sweep lists every TaskAction), got -1m0s"},
		{Name: "gc interval of a second", File: "executor:\n  gc:\n    interval: 1s\n", Want: "gc.interval: must be 0 (gc disabled) or at least 1m0s (each sweep lists every TaskAction), got 1s"},
		{Name: "gc not a mapping", File: "executor:\n  gc: 5m\n", Want: "config file <file>: gc must be a mapping, got a string"},
		{Name: "a duration as a number is nanoseconds (Flyte's config.Duration)", File: "executor:\n  requeueDuration: 10\n", Want: hotLoop + "10ns"},
		{Name: "an empty duration is zero", File: "executor:\n  requeueDuration: \"\"\n", Want: hotLoop + "0s"},
		{Name: "a duration as a boolean", File: "executor:\n  gc:\n    maxTTL: true\n",
			Want: `config file <file>: gc.maxTTL: a duration must be a string such as "90s" or "30m" (or a number of nanoseconds)`},

		// Pod security.
		{Name: "podSecurity.level unknown", Args: []string{"--executor.podSecurity.level=admin"},
			Want: `podSecurity.level: "admin" is not a pod security level (use baseline, restricted or privileged)`},
		{Name: "podSecurity.level empty", File: "executor:\n  podSecurity:\n    level: \"\"\n",
			Want: `podSecurity.level: "" is not a pod security level (use baseline, restricted or privileged)`},
		{Name: "allowedServiceAccounts with a bad namespace", File: "executor:\n  podSecurity:\n    allowedServiceAccounts:\n      Team_A: [runner]\n",
			Want: `podSecurity.allowedServiceAccounts: "Team_A": not a namespace name (or "*"): ` + dns1123},
		{Name: "allowedServiceAccounts with an empty list", File: "executor:\n  podSecurity:\n    allowedServiceAccounts:\n      team-a: []\n",
			Want: `podSecurity.allowedServiceAccounts: "team-a": lists no service account; list at least one, or "*" for any`},
		{Name: "allowedServiceAccounts as a string", File: "executor:\n  podSecurity:\n    allowedServiceAccounts: runner\n",
			Want: "config file <file>: podSecurity.allowedServiceAccounts must be a mapping from namespace to a list of service accounts, got a string"},
		{Name: "allowedServiceAccounts with a mapping for a list", File: "executor:\n  podSecurity:\n    allowedServiceAccounts:\n      team-a: {runner: x}\n",
			Want: "config file <file>: podSecurity.allowedServiceAccounts[team-a][0] must be a string, got a mapping"},
		{Name: "allowedServiceAccounts flag without =", Args: []string{"--executor.podSecurity.allowedServiceAccounts=team-a"},
			Want: `invalid argument "team-a" for "--executor.podSecurity.allowedServiceAccounts" flag: "team-a" is not namespace=serviceaccount`},

		// The file's shape.
		{Name: "unknown key", File: "executor:\n  metricsBindAdress: \":1\"\n",
			Want: `config file <file>: unknown key "metricsBindAdress" in section executor (did you mean "metricsBindAddress"?)`},
		{Name: "unknown key with no near miss", File: "executor:\n  workers: 4\n",
			Want: `config file <file>: unknown key "workers" in section executor`},
		{Name: "unknown nested key", File: "executor:\n  gc:\n    ttl: 1h\n",
			Want: `config file <file>: unknown key "gc.ttl" in section executor`},
		{Name: "misspelt section", File: "exeuctor:\n  leaderElect: true\n",
			Want: `config file <file>: unknown section "exeuctor" (did you mean "executor"?)`},
		{Name: "both spellings of the events URL, different", File: "executor:\n  eventsServiceURL: http://a:8090\n  EventsServiceURL: http://b:8090\n",
			Want: `config file <file>: EventsServiceURL and eventsServiceURL are one key (keys are case-insensitive), set to "http://b:8090" and "http://a:8090": keep one`},
		{Name: "two spellings of a nested key, different", File: "executor:\n  gc:\n    maxTTL: 1h\n    MAXTTL: 2h\n",
			Want: `config file <file>: gc.MAXTTL and gc.maxTTL are one key (keys are case-insensitive), set to "2h" and "1h": keep one`},
		{Name: "two spellings of the section, different", File: "executor:\n  cluster: a\nExecutor:\n  cluster: b\n",
			Want: `config file <file>: Executor and executor are one key (keys are case-insensitive), set to {"cluster":"b"} and {"cluster":"a"}: keep one`},
		{Name: "two spellings of a key of Flyte's, different", File: "storage:\n  type: s3\n  Type: minio\n",
			Want: `config file <file>: storage.Type and storage.type are one key (keys are case-insensitive), set to "minio" and "s3": keep one`},
		{Name: "a boolean that is none", File: "executor:\n  leaderElect: maybe\n",
			Want: `config file <file>: leaderElect must be true or false, got "maybe"`},
		{Name: "the executor section not a mapping", File: "executor: [leaderElect]\n",
			Want: "config file <file>: executor must be a mapping, got a list"},
		{Name: "list-form env vars with an item that is not a mapping", File: "plugins:\n  k8s:\n    default-env-vars:\n    - A=1\n",
			Want: "config file <file>: plugins.k8s.default-env-vars[0] must be a mapping, got a string"},
		{Name: "a value of Flyte's of the wrong type, named by its key", File: "plugins:\n  k8s:\n    default-tolerations:\n    - key: spot\n      tolerationSeconds: soon\n",
			Want: `config file <file>: plugins.k8s.default-tolerations[0].tolerationSeconds must be an integer, got "soon"`},
		{Name: "an env var name from the list form, validated", File: "plugins:\n  k8s:\n    default-env-vars:\n    - 1BAD: x\n",
			Want: `plugins.k8s.default-env-vars: "1BAD": not an environment variable name`},
		{Name: "Flyte's spelling, validated like ours", File: "executor:\n  EventsServiceURL: flyte-http:8090\n",
			Want: `eventsServiceURL: "flyte-http:8090" has no scheme: write it as "http://flyte-http:8090" (or https)`},
		{Name: "Flyte's storage section, bad type", File: "storage:\n  type: bogus\n",
			Want: `storage.type: "bogus": want s3, minio, local or stow`},
		{Name: "Flyte's log links, bad link type", File: "plugins:\n  logs:\n    templates:\n    - templateUris: [\"http://a/{{ .podName }}\"]\n      linkType: weird\n",
			Want: `plugins.logs.templates[0].linkType: "weird": want external, dashboard or ide`},
		// Flyte's otel section: checked for the exporter chosen only, as Flyte uses it.
		{Name: "otel: Jaeger's exporter, refused with what to set", File: "otel:\n  type: jaeger\n  jaeger:\n    endpoint: http://jaeger:14268/api/traces\n",
			Want: `otel.type: "jaeger": OpenTelemetry Go no longer has a Jaeger exporter, and Jaeger takes OTLP itself: ` +
				`set otel.type to otlpgrpc with otel.otlpgrpc.endpoint http://<jaeger-collector>:4317, ` +
				`or to otlphttp with otel.otlphttp.endpoint http://<jaeger-collector>:4318/v1/traces`},
		{Name: "otel: unknown exporter", File: "otel:\n  type: zipkin\n", Want: `otel.type: "zipkin": want noop, file, otlpgrpc or otlphttp`},
		{Name: "otel: exporter names are Flyte's, in its case", File: "otel:\n  type: OTLPGRPC\n", Want: `otel.type: "OTLPGRPC": want noop, file, otlpgrpc or otlphttp`},
		{Name: "otel: empty exporter", File: "otel:\n  type: \"\"\n", Want: `otel.type: "": want noop, file, otlpgrpc or otlphttp`},
		{Name: "otel: file without a name", File: "otel:\n  type: file\n  file:\n    filename: \"\"\n",
			Want: "otel.file.filename: must name the file spans are written to (otel.type is file)"},
		{Name: "otel: gRPC endpoint without a scheme", File: "otel:\n  type: otlpgrpc\n  otlpgrpc:\n    endpoint: collector:4317\n",
			Want: `otel.otlpgrpc.endpoint: "collector:4317": want a URL such as http://collector:4317 (http: plaintext, https: TLS) (otel.type is otlpgrpc)`},
		{Name: "otel: HTTP endpoint of another scheme", File: "otel:\n  type: otlphttp\n  otlphttp:\n    endpoint: grpc://collector:4318/v1/traces\n",
			Want: `otel.otlphttp.endpoint: "grpc://collector:4318/v1/traces": the scheme must be http or https, not "grpc" (otel.type is otlphttp)`},
		{Name: "otel: unknown sampler", File: "otel:\n  type: file\n  sampler:\n    parentSampler: never\n",
			Want: `otel.sampler.parentSampler: "never": want always or traceid`},
		{Name: "otel: ratio above 1", File: "otel:\n  type: otlphttp\n  sampler:\n    parentSampler: traceid\n    traceIdRatio: 5\n",
			Want: "otel.sampler.traceIdRatio: must be between 0 and 1 (the share of traces kept), got 5"},
		{Name: "otel: ratio not a number", File: "otel:\n  sampler:\n    traceIdRatio: most\n",
			Want: `config file <file>: otel.sampler.traceIdRatio must be a number, got "most"`},
		{Name: "otel: two problems, two lines", File: "otel:\n  type: otlpgrpc\n  otlpgrpc:\n    endpoint: \"\"\n  sampler:\n    parentSampler: traceid\n    traceIdRatio: -0.5\n",
			Want: "2 problems:\n" +
				`  otel.otlpgrpc.endpoint: "": want a URL such as http://collector:4317 (http: plaintext, https: TLS) (otel.type is otlpgrpc)` + "\n" +
				"  otel.sampler.traceIdRatio: must be between 0 and 1 (the share of traces kept), got -0.5"},
		{Name: "otel: noop judges nothing it does not use, as Flyte", File: "otel:\n  type: noop\n  otlpgrpc:\n    endpoint: nowhere\n  sampler:\n    parentSampler: never\n"},
		{Name: "otel: Flyte's section as its charts write it", File: "otel:\n  type: otlpgrpc\n  otlpgrpc:\n    endpoint: http://otel-collector.observability:4317\n  sampler:\n    parentSampler: traceid\n    traceIdRatio: 0.1\n  jaeger:\n    endpoint: http://unused:14268/api/traces\n"},
		{Name: "otel: keys in any case", File: "OTel:\n  Type: otlphttp\n  OtlpHttp:\n    Endpoint: https://collector:4318/v1/traces\n  Sampler:\n    ParentSampler: always\n"},
		{Name: "plugins not a mapping", File: "plugins: [logs]\n",
			Want: `config file <file>: plugins must be a mapping, got a list`},
		{Name: "top level not a mapping", File: "- executor\n",
			Want: `config file <file>: the top level must be a mapping with a section "executor"`},

		// Every bad key, one line each.
		{Name: "several problems", Args: []string{"--executor.maxSystemFailures=-1", "--executor.requeueDuration=-1s", "--executor.defaultCPU=-1"},
			Want: "3 problems:\n  defaultCPU: \"-1\"" + notPositive + "\n  maxSystemFailures: must be between 0 and 100, got -1\n  " + hotLoop + "-1s"},

		// Valid inputs: both paths accept them.
		{Name: "defaults"},
		{Name: "a Flyte deployment's file", File: flyteFile},
		{Name: "both spellings, same value", File: "executor:\n  eventsServiceURL: http://a:8090\n  EventsServiceURL: http://a:8090\n"},
		{Name: "no default CPU or memory", Args: []string{"--executor.defaultCPU=", "--executor.defaultMemory="}},
		{Name: "quantities written as numbers", File: "executor:\n  defaultCPU: 2\n  defaultMemory: 1073741824\n"},
		{Name: "bounds included", Args: []string{"--executor.requeueDuration=1s", "--executor.maxSystemFailures=100", "--executor.maxConcurrentReconciles=1024"}},
		{Name: "requeueDuration at the upper bound", File: "executor:\n  requeueDuration: 15s\n  maxSystemFailures: 0\n"},
		{Name: "metrics and probes on one port, different hosts", Args: []string{"--executor.metricsBindAddress=127.0.0.1:9000", "--executor.healthProbeBindAddress=127.0.0.2:9000"}},
		{Name: "probes on the webhook port while the webhooks are off", Args: []string{"--executor.healthProbeBindAddress=:9443"}},
		{Name: "profiles on loopback", Args: []string{"--executor.pprofBindAddress=127.0.0.1:6060"}},
		{Name: "webhooks and probes on one port, different hosts", Args: []string{"--executor.webhook.enabled=true", "--executor.webhook.host=127.0.0.1", "--executor.healthProbeBindAddress=127.0.0.2:9443"}},
		{Name: "metrics and probes disabled", Args: []string{"--executor.metricsBindAddress=0", "--executor.healthProbeBindAddress=0"}},
		{Name: "both on random ports", Args: []string{"--executor.metricsBindAddress=:0", "--executor.healthProbeBindAddress=:0"}},
		{Name: "cert directories with a PEM pair", Args: []string{"--executor.webhookCertPath=" + c.Good, "--executor.metricsCertPath=" + c.Good}},
		{Name: "pod security from flags", Args: []string{"--executor.podSecurity.level=restricted", "--executor.podSecurity.allowedServiceAccounts=team-a=runner,team-a=builder,*=default"}},
		{Name: "pod security from the file", File: "executor:\n  podSecurity:\n    level: privileged\n    allowedServiceAccounts:\n      team-a: [runner, builder]\n      \"*\": [\"*\"]\n"},
		{Name: "namespaces from flags", Args: []string{"--executor.namespaces=team-a,team-b"}},
		{Name: "namespaces from the file", File: "executor:\n  namespaces: [team-a]\n"},
		{Name: "gc disabled with a bare 0", File: "executor:\n  gc:\n    interval: 0\n    maxTTL: 0\n"},

		// Valid as Flyte's loader reads them.
		{Name: "an infinity in another section is not ours to judge", File: "logger:\n  level: .inf\nexecutor:\n  cluster: c1\n"},
		{Name: "namespaces as a comma-separated string", File: "executor:\n  namespaces: team-a,team-b\n"},
		{Name: "allowedServiceAccounts with a string for a list", File: "executor:\n  podSecurity:\n    allowedServiceAccounts:\n      team-a: runner\n"},
		{Name: "a duration as a number of nanoseconds", File: "executor:\n  gc:\n    maxTTL: 3600000000000\n"},
		{Name: "keys in any case", File: "Executor:\n  LeaderElect: true\n  eventsserviceurl: http://flyte-http:8090\n  GC:\n    MaxTTL: 2h\n"},
		{Name: "booleans and numbers as strings", File: "executor:\n  leaderElect: \"true\"\n  maxSystemFailures: \"5\"\n  kubeAPIQPS: \"50\"\n  webhookPort: \"9444\"\n"},
		{Name: "numbers and booleans for strings", File: "executor:\n  cluster: 7\n  defaultCPU: 0.5\n  webhookCertName: true\n"},
		{Name: "list-form env vars, annotations and labels", File: "plugins:\n  k8s:\n    default-env-vars:\n    - _U_INSECURE: \"true\"\n    - _U_USE_ACTIONS: \"1\"\n    default-annotations:\n    - cluster-autoscaler.kubernetes.io/safe-to-evict: \"true\"\n    default-labels: []\n"},
		{Name: "keys of Flyte's sections we do not read, and in any case", File: "storage:\n  Type: stow\n  signedURL:\n    stowConfigOverride:\n      endpoint: http://localhost:30002\n  stow:\n    config:\n      disable_ssl: false\n  defaultHttpClient:\n    maxIdleConns: 10\nplugins:\n  k8s:\n    scheduler-name: x\n    co-pilot:\n      image: i\n  logs:\n    kubernetes-enabled: \"false\"\n    templates:\n    - templateUris: http://a/{{ .podName }}\n      messageFormat: 7\n"},
		{Name: "empty mappings and nulls keep the defaults", File: "executor:\n  gc: {}\n  requeueDuration:\nplugins:\n  k8s:\n    default-annotations: {}\n"},
	}
}

func write(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func selfSigned(t testing.TB) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "executor-webhook"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"executor-webhook.executor-system.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
