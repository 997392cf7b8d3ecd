package ray

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// testdata/golden/phases.flyte.tsv is a fact: the phase, error code and
// kind Flyte's Ray plugin reported for each status below, through Flyte's
// executor's k8s PluginManager (the same commit as the golden RayJobs), for
// the RayJob of the "workers" case (first line: the SHA-256 of that
// TaskAction as -golden-inputs writes it). A throwaway program launched the
// TaskAction with a fake client, then, for each status written on the
// RayJob, ran the plugin manager's next round with a fresh in-memory store
// holding the attempt's outputs and no error.pb (its paths moved to mem://,
// the only scheme that store serves), and printed the transition: "error"
// where Flyte's plugin returns an error instead of a phase.
var goldenStatuses = map[string]rayv1.RayJobStatus{
	"none":               {},
	"Initializing":       {JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing, RayClusterName: "c"},
	"Running/PENDING":    {JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, JobStatus: rayv1.JobStatusPending, RayClusterName: "c"},
	"Running/RUNNING":    {JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, JobStatus: rayv1.JobStatusRunning, RayClusterName: "c"},
	"Complete/SUCCEEDED": {JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, JobStatus: rayv1.JobStatusSucceeded, RayClusterName: "c"},
	"Complete/STOPPED":   {JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, JobStatus: rayv1.JobStatusStopped, RayClusterName: "c"},
	"Failed/AppFailed": {JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, JobStatus: rayv1.JobStatusFailed,
		Reason: rayv1.AppFailed, Message: "exit code 1", RayClusterName: "c"},
	"Failed/SubmissionFailed": {JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, Reason: rayv1.SubmissionFailed,
		Message: "submitter failed", RayClusterName: "c"},
	"Failed/JobDeploymentStatusTransitionGracePeriodExceeded": {JobDeploymentStatus: rayv1.JobDeploymentStatusFailed,
		JobStatus: rayv1.JobStatusFailed, Reason: rayv1.JobDeploymentStatusTransitionGracePeriodExceeded, RayClusterName: "c"},
	"Suspending":       {JobDeploymentStatus: rayv1.JobDeploymentStatusSuspending},
	"Suspended":        {JobDeploymentStatus: rayv1.JobDeploymentStatusSuspended},
	"Retrying":         {JobDeploymentStatus: rayv1.JobDeploymentStatusRetrying},
	"Waiting":          {JobDeploymentStatus: rayv1.JobDeploymentStatusWaiting},
	"ValidationFailed": {JobDeploymentStatus: rayv1.JobDeploymentStatusValidationFailed, Reason: rayv1.ValidationFailed, Message: "bad"},
}

// flytePhases are Flyte's phase names as the plugin's.
var flytePhases = map[string]string{
	"PhaseQueued": "Queued", "PhaseInitializing": "Initializing", "PhaseRunning": "Running", "PhaseSuccess": "Succeeded",
	"PhasePermanentFailure": "PermanentFailure", "PhaseRetryableFailure": "RetryableFailure",
}

// phaseDifferences are the deliberate differences of docs/engines/ray.md
// from Flyte's reading of a status: Flyte's line, and ours.
var phaseDifferences = map[string][2]string{
	// A stopped Ray job did not succeed.
	"Complete/STOPPED": {"Succeeded  ", "PermanentFailure RayJobStopped USER"},
	// KubeRay refused the RayJob: final, rather than an error every round.
	"ValidationFailed": {"error", "PermanentFailure RayJobValidationFailed USER"},
	// Statuses Flyte's plugin does not know, where the job is not running.
	"Retrying": {"error", "Initializing  "},
	"Waiting":  {"error", "Initializing  "},
}

func TestGoldenPhases(t *testing.T) {
	path := filepath.Join("testdata", "golden", "phases.flyte.tsv")
	fact, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(fact), "\n"), "\n")
	var workers goldenCase
	for _, gc := range goldenCases() {
		if gc.name == "workers" {
			workers = gc
		}
	}
	sum := sha256.Sum256(inputJSON(t, workers.ta(t)))
	if want := "# input sha256: " + hex.EncodeToString(sum[:]); lines[0] != want {
		t.Fatalf("%s was printed for another TaskAction: %q, want %q", path, lines[0], want)
	}
	seen := map[string]bool{}
	for _, line := range lines[1:] {
		f := strings.Split(line, "\t")
		name := f[0]
		st, ok := goldenStatuses[name]
		if !ok {
			t.Errorf("%s: status %q is not this test's", path, name)
			continue
		}
		seen[name] = true
		flyte := "error"
		if f[1] != "error" {
			flyte = fmt.Sprintf("%s %s %s", flytePhases[f[1]], f[2], f[3])
		}
		want := flyte
		if d, ok := phaseDifferences[name]; ok {
			if flyte != d[0] {
				t.Errorf("%s: Flyte's is %q, the listed difference expects %q", name, flyte, d[0])
			}
			want = d[1]
		}
		created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		obs := ObserveJob(&rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "rk7x2m9q4t-a0-0", CreationTimestamp: created}, Status: st})
		got := string(obs.Phase) + "  "
		if obs.Error != nil {
			got = fmt.Sprintf("%s %s %s", obs.Phase, obs.Error.Code, obs.Error.Kind)
		}
		if got != want {
			t.Errorf("%s: %q, want %q (Flyte: %s)", name, got, want, line)
		}
	}
	for name := range goldenStatuses {
		if !seen[name] {
			t.Errorf("%s has no line for %s", path, name)
		}
	}
}
