package kubeflow

import (
	"strconv"
	"strings"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/tasklog"
)

// maxLinkedReplicas bounds the replicas of one group that get links: the
// links go into every event of the attempt.
const maxLinkedReplicas = 100

// replicaCount is a replica group of a job and its size.
type replicaCount struct {
	rtype kubeflowv1.ReplicaType
	count int32
}

// replicaCounts are the groups of specs present, in the order of types.
func replicaCounts(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec, types ...kubeflowv1.ReplicaType) []replicaCount {
	var out []replicaCount
	for _, t := range types {
		if s, ok := specs[t]; ok && s != nil && s.Replicas != nil {
			out = append(out, replicaCount{t, *s.Replicas})
		}
	}
	return out
}

// jobLogs are the log links of the job's replica pods, group by group, each
// rendered by the plugins.logs configuration as a pod's links are, with the
// replica's name ("master-0") after each link's name. The job's creation
// stands for the pods' start, its completion for their end.
func jobLogs(r *tasklog.Renderer, tc plugin.TaskContext, j jobState, groups []replicaCount, containerName string) ([]*core.TaskLog, error) {
	if r == nil {
		return nil, nil
	}
	in := plugin.LogInput(tc, j.namespace, j.name)
	in.ContainerName, in.PodStart = containerName, j.created
	if ct := j.status.CompletionTime; ct != nil {
		in.PodFinish = ct.Time
	}
	var out []*core.TaskLog
	for _, g := range groups {
		for i := int32(0); i < min(g.count, maxLinkedReplicas); i++ {
			in.PodName = replicaPodName(j.name, string(g.rtype), i)
			in.LogName = " (" + strings.ToLower(string(g.rtype)) + "-" + strconv.Itoa(int(i)) + ")"
			links, err := r.Links(in)
			if err != nil {
				return nil, err
			}
			out = append(out, links...)
		}
	}
	return out, nil
}
