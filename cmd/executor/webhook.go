package main

import (
	"github.com/spf13/cobra"
)

// newWebhookCommand runs the admission webhooks alone (secret injection and
// TaskAction admission), without the reconciler: the same as the root command
// with --executor.webhook.standalone=true.
func newWebhookCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "webhook",
		Short: "Serve only the admission webhooks (secret injection, TaskAction admission)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			cfg.Webhook.Standalone = true
			return runManager(cmd, g, cfg)
		},
	}
}
