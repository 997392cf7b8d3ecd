// Command executor runs TaskActions on Kubernetes; its subcommands run the
// services it talks to and help operators.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := newRootCommand().ExecuteContext(signalContext()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// signalContext is cancelled by the first SIGTERM or SIGINT, so that the
// manager stops its runnables, releases the leader lease and exits 0. Shutdown
// is bounded; a second signal only says so (forcing it would leave `executor
// local`'s etcd and kube-apiserver behind), a third exits at once.
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "shutting down; a third signal exits at once (and may leave child processes running)")
		<-sigs
		os.Exit(1)
	}()
	return ctx
}
