// Package v1 holds the TaskAction API of group flyte.org.
// +kubebuilder:object:generate=true
// +groupName=flyte.org
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the TaskAction API.
	GroupVersion = schema.GroupVersion{Group: "flyte.org", Version: "v1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
