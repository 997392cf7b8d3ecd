package spark

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// Error codes of a SparkApplication's failures, Flyte's.
const (
	// CodeDownstreamSystemError: the application failed, or its submission
	// did (a retryable user failure, as in Flyte).
	CodeDownstreamSystemError = "DownstreamSystemError"
	// CodeUnexpectedObjectDeletion: the application is being deleted by
	// someone else before it ended (a system failure).
	CodeUnexpectedObjectDeletion = "UnexpectedObjectDeletion"
)

// applicationStatePendingSubmission was written by operators before 2.x;
// such a status still means submitted.
const applicationStatePendingSubmission sparkv1beta2.ApplicationStateType = "PENDING_SUBMISSION"

// Names of the links the plugin adds, Flyte's.
const (
	DriverUIName  = "Spark Driver UI"
	HistoryUIName = "Spark History UI"
)

// envEnableVSCode in the driver's environment asks for the IDE link.
const envEnableVSCode = "_F_E_VS"

// maxMessage bounds the operator's error message kept in an observation.
const maxMessage = 2048

// observe maps the application's status to the attempt's phase, as Flyte's
// plugin does, with its log links. Pure: the application is as read.
func (p *Plugin) observe(app *sparkv1beta2.SparkApplication, tc plugin.TaskContext) plugin.Observation {
	obs := ObserveStatus(app)
	obs.Logs = p.links(app, tc, obs.Phase)
	// Flyte's reasons when an IDE link is offered.
	for _, l := range obs.Logs {
		if l.GetLinkType() == core.TaskLog_IDE && obs.Error == nil {
			obs.Message = "Vscode server is not ready"
			if obs.Phase == plugin.PhaseRunning {
				obs.Message = "Vscode server is ready"
			}
		}
	}
	return obs
}

// ObserveStatus is where the application is, from its status: not seen by the
// operator yet, queued; submitted, initializing; completed, succeeded;
// failed or refused at submission, a retryable user failure; anything else
// (running, being retried or torn down by the operator), running. An
// application deleted before it ended is a system failure.
func ObserveStatus(app *sparkv1beta2.SparkApplication) plugin.Observation {
	st := app.Status
	var obs plugin.Observation
	switch st.AppState.State {
	case sparkv1beta2.ApplicationStateNew:
		obs = plugin.Observation{Phase: plugin.PhaseQueued, Message: "job queued", OccurredAt: app.CreationTimestamp.Time}
	case sparkv1beta2.ApplicationStateSubmitted, applicationStatePendingSubmission:
		obs = plugin.Observation{Phase: plugin.PhaseInitializing, Message: "job submitted", OccurredAt: st.LastSubmissionAttemptTime.Time}
	case sparkv1beta2.ApplicationStateFailedSubmission:
		obs = failed(fmt.Sprintf("Spark Job Submission Failed with Error: %s", st.AppState.ErrorMessage))
		obs.Finished, obs.OccurredAt = true, endTime(app)
	case sparkv1beta2.ApplicationStateFailed:
		obs = failed(fmt.Sprintf("Spark Job Failed with Error: %s", st.AppState.ErrorMessage))
		obs.Finished, obs.OccurredAt = true, endTime(app)
	case sparkv1beta2.ApplicationStateCompleted:
		obs = plugin.Observation{Phase: plugin.PhaseSucceeded, Finished: true, OccurredAt: endTime(app)}
	default:
		obs = plugin.Observation{Phase: plugin.PhaseRunning, Message: "job " + strings.ToLower(string(st.AppState.State))}
	}
	if app.DeletionTimestamp != nil {
		obs.Deleting = true
		if !obs.Phase.IsTerminal() {
			msg := fmt.Sprintf("SparkApplication %s/%s is being deleted before it ended", app.Namespace, app.Name)
			obs = plugin.Observation{Phase: plugin.PhaseRetryableFailure, Deleting: true, Message: msg,
				Error: &plugin.ExecError{Code: CodeUnexpectedObjectDeletion, Kind: flytev1.ErrorKindSystem, Message: msg}}
		}
	}
	return obs
}

func failed(msg string) plugin.Observation {
	msg = plugin.Truncate(msg, maxMessage)
	return plugin.Observation{Phase: plugin.PhaseRetryableFailure, Message: msg,
		Error: &plugin.ExecError{Code: CodeDownstreamSystemError, Kind: flytev1.ErrorKindUser, Message: msg}}
}

// endTime is when the application ended: its termination time, else its
// last submission, else its creation (Flyte's order).
func endTime(app *sparkv1beta2.SparkApplication) time.Time {
	switch {
	case !app.Status.TerminationTime.IsZero():
		return app.Status.TerminationTime.Time
	case !app.Status.LastSubmissionAttemptTime.IsZero():
		return app.Status.LastSubmissionAttemptTime.Time
	}
	return app.CreationTimestamp.Time
}

// links are the attempt's log links in Flyte's order: the driver's (mixed,
// once the operator named the driver pod), the user logs', the system logs'
// and all user logs' (shown while pending too), then the Spark UI: the
// driver's while it runs, the history server's once it ended. The task's own
// links (metadata.log_links) come first, once.
func (p *Plugin) links(app *sparkv1beta2.SparkApplication, tc plugin.TaskContext, phase plugin.Phase) []*core.TaskLog {
	driverPod := app.Status.DriverInfo.PodName
	base := logInput(app, tc)
	var out []*core.TaskLog
	add := func(r *tasklog.Renderer, in tasklog.Input, showWhilePending bool) {
		ls, err := r.Links(in)
		if err != nil {
			return // a link that cannot be rendered is left out; the attempt goes on
		}
		for _, l := range ls {
			if showWhilePending {
				l.ShowWhilePending = true
			}
		}
		out = append(out, ls...)
	}
	taskLinks := templateLinks(tc.Task)
	user := base
	user.PodName = driverPod
	if driverPod != "" {
		mixed := user
		mixed.TaskLinks, taskLinks = taskLinks, nil
		mixed.EnableVSCode = vscodeEnabled(app.Spec.Driver.Env)
		add(p.logs.mixed, mixed, false)
	}
	user.TaskLinks = taskLinks
	add(p.logs.user, user, false)
	whole := base
	whole.PodName = app.Name
	add(p.logs.system, whole, false)
	add(p.logs.allUser, whole, true)

	st := app.Status
	switch st.AppState.State {
	case sparkv1beta2.ApplicationStateFailed, sparkv1beta2.ApplicationStateCompleted:
		if st.SparkApplicationID != "" && p.cfg.SparkHistoryServerURL != "" {
			out = append(out, &core.TaskLog{Uri: fmt.Sprintf("%s/history/%s", p.cfg.SparkHistoryServerURL, st.SparkApplicationID),
				Name: HistoryUIName, Ready: true, MessageFormat: core.TaskLog_JSON, LinkType: core.TaskLog_DASHBOARD})
		}
	case sparkv1beta2.ApplicationStateRunning:
		if uri := st.DriverInfo.WebUIIngressAddress; uri != "" {
			// Older operators leave the scheme out.
			if !strings.HasPrefix(uri, "https://") && !strings.HasPrefix(uri, "http://") {
				uri = "https://" + uri
			}
			out = append(out, &core.TaskLog{Uri: uri, Name: DriverUIName, Ready: phase == plugin.PhaseRunning,
				MessageFormat: core.TaskLog_JSON, LinkType: core.TaskLog_DASHBOARD})
		}
	}
	return out
}

// logInput is what every link of the attempt is rendered with: its
// identity (the pod name is set per link group).
func logInput(app *sparkv1beta2.SparkApplication, tc plugin.TaskContext) tasklog.Input {
	ta := tc.TaskAction
	in := tasklog.Input{
		Namespace: app.Namespace, Project: ta.Spec.Project, Domain: ta.Spec.Domain,
		Run: ta.Spec.RunName, Action: ta.Spec.ActionName, RetryAttempt: uint32(max(tc.Attempt, 1) - 1),
		NodeID: ta.Spec.ActionName, GeneratedName: app.Name,
	}
	if t := tc.Task; t != nil {
		in.Task = &core.Identifier{ResourceType: core.ResourceType_TASK, Org: t.ID.Org, Project: t.ID.Project,
			Domain: t.ID.Domain, Name: t.ID.Name, Version: t.ID.Version}
		in.Org = t.ID.Org
	}
	return in
}

// templateLinks are the template's own links (Flyte's form only).
func templateLinks(t *task.Task) []*core.TaskLog {
	if t == nil || t.Form != task.FormFlyte {
		return nil
	}
	tmpl := &core.TaskTemplate{}
	if err := proto.Unmarshal(t.Raw, tmpl); err != nil {
		return nil
	}
	return tmpl.GetMetadata().GetLogLinks()
}

// vscodeEnabled says whether the driver's environment asks for the IDE link.
func vscodeEnabled(env []corev1.EnvVar) bool {
	for _, e := range env {
		if e.Name == envEnableVSCode {
			on, err := strconv.ParseBool(e.Value)
			return err == nil && on
		}
	}
	return false
}
