// Package envtest runs the Spark plugin through the executor, as
// setup.Setup wires it, against a real kube-apiserver and etcd serving the
// Spark operator's own SparkApplication CRD (from its Go module); the tests
// play the operator by writing the applications' status.
package envtest
