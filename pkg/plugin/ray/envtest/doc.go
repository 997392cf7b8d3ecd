// Package envtest runs the Ray plugin through the executor, as setup.Setup
// wires it, against a real kube-apiserver and etcd serving KubeRay's own
// RayJob and RayCluster CRDs (from its Go module, the version go.mod
// requires); the tests play the KubeRay operator by writing the RayJobs'
// status.
package envtest
