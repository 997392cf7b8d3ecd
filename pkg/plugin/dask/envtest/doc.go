// Package envtest runs the Dask plugin through the executor, as setup.Setup
// wires it, against a real kube-apiserver and etcd serving the Dask
// operator's own CRDs (from its Go module, dask-kubernetes); the tests play
// the operator by writing the DaskJobs' status.
package envtest
