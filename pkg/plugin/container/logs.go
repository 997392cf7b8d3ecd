package container

import (
	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// LogInput is an attempt as the log link templates see it, for its object
// generatedName in namespace: the run and action, the retry, the task's
// identity and config, and (Flyte's form) the template's own links. The
// caller adds the pod, the container and the times.
func LogInput(tc plugin.TaskContext, namespace, generatedName string) tasklog.Input {
	ta := tc.TaskAction
	in := tasklog.Input{
		Namespace: namespace, Project: ta.Spec.Project, Domain: ta.Spec.Domain,
		Run: ta.Spec.RunName, Action: ta.Spec.ActionName, RetryAttempt: uint32(max(tc.Attempt, 1) - 1),
		NodeID: ta.Spec.ActionName, GeneratedName: generatedName,
	}
	if t := tc.Task; t != nil {
		in.Task = &core.Identifier{ResourceType: core.ResourceType_TASK, Org: t.ID.Org, Project: t.ID.Project,
			Domain: t.ID.Domain, Name: t.ID.Name, Version: t.ID.Version}
		in.TaskConfig, in.Org = t.Config, t.ID.Org
		if t.Form == task.FormFlyte {
			tmpl := &core.TaskTemplate{}
			if err := proto.Unmarshal(t.Raw, tmpl); err == nil {
				in.TaskLinks = tmpl.GetMetadata().GetLogLinks()
			}
		}
	}
	return in
}
