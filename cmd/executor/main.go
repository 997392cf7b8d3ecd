// Command executor runs TaskActions on Kubernetes; its subcommands run the
// services it talks to and help operators.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
