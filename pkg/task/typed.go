package task

import (
	flytev1 "github.com/taskaction/executor/api/v1"
)

// fromTyped decodes the typed, human-writable template; field is its path in
// the TaskAction, for error messages.
func fromTyped(tt *flytev1.TaskTemplate, field string) (*Task, error) {
	t := &Task{
		Form:    FormTyped,
		ID:      Identifier{Name: tt.ID.Name, Version: tt.ID.Version},
		Retries: tt.Retries,
		Config:  tt.Config,
		Cache:   Cache{Serializable: tt.CacheSerializable},
	}
	if tt.Timeout != nil {
		if tt.Timeout.Duration < 0 {
			return nil, fieldErr(field+".timeout", "must not be negative, got %v", tt.Timeout.Duration)
		}
		t.Timeout = tt.Timeout.Duration
	}
	if c := tt.Container; c != nil {
		t.Container = &Container{Image: c.Image, Command: c.Command, Args: c.Args, Env: c.Env, Resources: c.Resources}
	}
	if sc := tt.SecurityContext; sc != nil {
		if sc.RunAs != nil {
			t.ServiceAccount = sc.RunAs.K8sServiceAccount
		}
		for _, s := range sc.Secrets {
			m := MountRequirement(s.MountRequirement)
			if m == "" {
				m = MountAny
			}
			t.Secrets = append(t.Secrets, Secret{Group: s.Group, Key: s.Key, Mount: m})
		}
	}
	if pt := tt.PodTemplate; pt != nil {
		t.PodLabels, t.PodAnnotations = pt.Labels, pt.Annotations
		t.PrimaryContainerName = pt.PrimaryContainerName
		if pt.Spec != nil {
			t.PodSpec = pt.Spec.DeepCopy()
		}
	}
	if t.Container == nil && t.PodSpec == nil {
		return nil, fieldErr(field+".container", "is required (or a podTemplate.spec with the primary container)")
	}
	return t, nil
}
