package main

import (
	"github.com/spf13/cobra"

	"loam.dev/router/kernel/merge"
)

func newOracleCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "oracle",
		Short: "Answer merge-oracle requests: JSON lines on stdin, one answer line each on stdout",
		Long: `oracle runs the reference merge (k-way merge, LIMIT/OFFSET, aggregate decomposition;
the mirror of the proved oracle make proof extracts from proof/) as a filter: each request line on standard input gets one
response line on standard output, in order, flushed as soon as it is answered, until
standard input ends. Differential tests of real routers feed it the shards' rows and compare
its answer with the router's. The line format is kernel/merge's (see its package doc).`,
		Example: `  echo '{"op":"merge","order":[{"col":0}],"limit":2,"shards":[[[1],[3]],[[2]]]}' | loamrouter oracle
  loamrouter oracle < requests.jsonl > answers.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return merge.Serve(cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}
