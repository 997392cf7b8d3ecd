package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newConfigCommand prints the effective configuration: a dry run for operators.
func newConfigCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration (defaults, --config file, flags) as YAML, or why it is invalid",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			out, err := cfg.YAML()
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), string(out))
			return err
		},
	}
}
