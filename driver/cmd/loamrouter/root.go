package main

import (
	"github.com/spf13/cobra"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "loamrouter",
		Short:         "Keep sharded Postgres (PgDog) and MySQL (Vitess) routable and safe",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("data", "./loam-data", "directory of the embedded store (loam.db)")
	root.AddCommand(newMapCmd(), newDemoCmd())
	return root
}
