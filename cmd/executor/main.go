// Command executor runs TaskActions on Kubernetes; its subcommands run the
// services it talks to and help operators.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	// SIGTERM/SIGINT cancel the context so the manager stops its runnables,
	// releases the leader lease and exits 0; a second signal exits at once.
	if err := newRootCommand().ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
