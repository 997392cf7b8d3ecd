package main

import (
	goflag "flag"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/setup"
)

// globalFlags are shared by the manager and its subcommands.
type globalFlags struct {
	configFile string
	kubeconfig string
	zap        zap.Options
}

func newRootCommand() *cobra.Command {
	g := &globalFlags{zap: zap.Options{Development: false}}
	root := &cobra.Command{
		Use:           "executor",
		Short:         "Run TaskActions as Pods: the executor's controller manager",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			return runManager(cmd, g, cfg)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.configFile, "config", "", "YAML `file` with an executor: section, or a glob pattern of files merged in order, as Flyte takes it (/etc/flyte/config.d/*.yaml)")
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file (else $KUBECONFIG, in-cluster, ~/.kube/config)")
	zfs := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	g.zap.BindFlags(zfs)
	pf.AddGoFlagSet(zfs)
	d := config.Default()
	config.BindFlags(pf, &d) // values are re-applied onto the loaded file in config.Load

	root.AddCommand(newConfigCommand(g))
	addEventsCommands(root, g)
	root.AddCommand(newLocalCommand(g))
	root.AddCommand(newCacheServiceCommand(g))
	root.AddCommand(newWebhookCommand(g))
	return root
}

// loadConfig is the one way every command reads its configuration: defaults,
// --config, flags, then config.Validate. `executor config` (the dry run) and
// the manager's start get the same answer from it.
func (g *globalFlags) loadConfig(fs *pflag.FlagSet) (config.Config, error) {
	cfg, err := config.Load(g.configFile, fs)
	if err != nil {
		return config.Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, nil
}

func (g *globalFlags) restConfig() (*rest.Config, error) {
	if g.kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", g.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", g.kubeconfig, err)
		}
		return c, nil
	}
	c, err := crconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("no Kubernetes configuration (use --kubeconfig, KUBECONFIG or run in a cluster): %w", err)
	}
	return c, nil
}

func runManager(cmd *cobra.Command, g *globalFlags, cfg config.Config) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&g.zap)))
	restCfg, err := g.restConfig()
	if err != nil {
		return err
	}
	mgr, err := setup.Setup(cfg, restCfg, setup.Options{})
	if err != nil {
		return err
	}
	return mgr.Start(cmd.Context())
}
