package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Show the main job end to end on this machine",
		Long: `demo creates an example shard map record in a fresh embedded store (in a temporary
directory, removed afterwards), reads it back and prints it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "loam-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			root := cmd.Root()
			out := cmd.OutOrStdout()
			for _, argv := range [][]string{
				{"--data", dir, "map", "init", "app", "--example"},
				{"--data", dir, "map", "show", "app"},
			} {
				fmt.Fprintf(out, "$ loamrouter %s\n", strings.Join(argv[2:], " "))
				root.SetArgs(argv)
				if err := root.ExecuteContext(cmd.Context()); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
