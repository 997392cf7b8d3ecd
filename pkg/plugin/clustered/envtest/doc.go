// Package envtest runs the clustered plugin through the executor, as
// setup.Setup wires it, against a real kube-apiserver and etcd serving
// JobSet's own CRD (from its Go module, sigs.k8s.io/jobset); the tests play
// the JobSet controller by writing the JobSets' status.
package envtest
