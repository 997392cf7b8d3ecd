package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/taskaction/executor/pkg/local"
)

// newLocalCommand runs the whole system on this machine, in the foreground.
func newLocalCommand(g *globalFlags) *cobra.Command {
	o := local.Options{}
	logsToStderr := false
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run a local control plane, the events and cache services, the executor and a node that runs pods as local processes",
		Long: `Run everything on this machine, in the foreground, until Ctrl-C:
a control plane (etcd and kube-apiserver from bin/k8s, built by ` + "`make envtest`" + `)
with the CRD and RBAC installed, the events and cache services on SQLite in the
data directory, the executor, and a node that runs each pod's container command
as a local process (the image is not used). The kubeconfig is written to
<data-dir>/kubeconfig and the components' logs to <data-dir>/executor.log. The
control plane's state is temporary: each start is a fresh cluster; the
services' SQLite files stay in the data directory.

With --demo, the samples of config/samples are applied and their progress shown
until each reached its expected end (exit 0), or not (exit 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			opts := []zap.Opts{zap.UseFlagOptions(&g.zap)}
			if !logsToStderr {
				// The terminal is for the summary and the demo's table; the
				// logs go to a file, unless the data directory is unusable,
				// which Run then reports.
				if err := os.MkdirAll(o.DataDir, 0o750); err == nil {
					path := filepath.Join(o.DataDir, "executor.log")
					if f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640); err == nil {
						defer func() { _ = f.Close() }()
						opts = append(opts, zap.WriteTo(f))
						_, _ = fmt.Fprintf(cmd.OutOrStdout(), "executor local: logs in %s\n", path)
					}
				}
			}
			log := zap.New(opts...)
			ctrl.SetLogger(log)
			o.Config, o.Log, o.Out = cfg, log, cmd.OutOrStdout()
			return local.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", local.DefaultDataDir, "directory for the kubeconfig, the services' SQLite files, the logs and the pods' output")
	f.BoolVar(&o.Demo, "demo", false, "apply the samples, show their progress and exit when they are done")
	f.StringVar(&o.SamplesDir, "samples-dir", "", "TaskActions --demo applies (default config/samples); a file named *fail* must fail after its retries, one with a cacheKey is run twice")
	f.DurationVar(&o.DemoTimeout, "demo-timeout", 3*time.Minute, "how long --demo waits for the samples")
	f.IntVar(&o.MaxPods, "max-pods", 8, "pods whose processes run at once on the local node")
	f.BoolVar(&logsToStderr, "logs-to-stderr", false, "write the components' logs to stderr instead of <data-dir>/executor.log")
	return cmd
}
