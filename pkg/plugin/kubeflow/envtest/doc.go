// Package envtest runs the Kubeflow plugins through the executor, as
// setup.Setup wires it, against a real kube-apiserver and etcd serving the
// training operator's own CRDs (from its Go module); the tests play the
// operator by writing the jobs' status.
package envtest
