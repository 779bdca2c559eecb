package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"loam.dev/router/kernel/shardmap"
)

// located is a key's shard under one layout, as printed.
type located struct {
	Generation uint64 `json:"generation"`
	Key        string `json:"key"`
	Column     string `json:"column"`
	Type       string `json:"type"`
	Index      int    `json:"shard_index"`
	Shard      string `json:"shard"`
	Why        string `json:"why"`
	Backend    string `json:"backend"`
	Fence      string `json:"fence"`
}

func locateIn(l shardmap.Layout, gen uint64, key string) (located, error) {
	loc, err := l.Locate(key)
	if err != nil {
		return located{}, err
	}
	k := l.Scheme.ShardKey()
	sh := l.Shards[loc.Shard]
	return located{Generation: gen, Key: key, Column: k.Column, Type: k.Type.String(), Index: loc.Shard, Shard: loc.Name, Why: loc.Why,
		Backend: fmt.Sprintf("%s:%d/%s", sh.Backend.Host, sh.Backend.Port, sh.Backend.Database), Fence: sh.Fence.String()}, nil
}

func (l located) explain(w io.Writer, label string) {
	fmt.Fprintf(w, "%s: %s = %s (%s)\n", label, l.Column, l.Key, l.Type)
	fmt.Fprintf(w, "  why    %s\n", l.Why)
	fmt.Fprintf(w, "  shard  %d %s at %s (fence %s)\n", l.Index, l.Shard, l.Backend, l.Fence)
}

func newLocateCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "locate <db> <key>",
		Short: "Say which shard holds a key, and why (hash and remainder, or keyspace id and range, or rule)",
		Long: `locate computes the shard a sharding key routes to under the database's record, with the
kernels the routers match bit for bit (Postgres hash partitioning for PgDog, PgDog's rule
order for lists and ranges, the vindex and keyspace-id ranges for Vitess), and says why.
While a reshard is under way it also shows where the key goes in the target layout.`,
		Example: `  loamrouter locate app 42
  loamrouter locate app 42 --output json
  loamrouter locate app -- -7             # a negative key after --
  loamrouter locate customer 'a3bb189e-8bf9-3888-9912-ace4e6543002'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			ref := c.db(args[0])
			rec, err := s.Read(cmd.Context(), ref)
			if err != nil {
				return fmt.Errorf("%s: %w", ref, err)
			}
			now, err := locateIn(rec.Layout, rec.Generation, args[1])
			if err != nil {
				return fmt.Errorf("%s generation %d: %w", ref, rec.Generation, err)
			}
			out := map[string]any{"db": ref.String(), "now": now}
			var target *located
			if rec.Target != nil {
				t, err := locateIn(*rec.Target, rec.State.To, args[1])
				if err != nil {
					return fmt.Errorf("%s target layout (generation %d): %w", ref, rec.State.To, err)
				}
				target = &t
				out["target"] = t
			}
			return c.emit(cmd.OutOrStdout(), out, func(w io.Writer) error {
				now.explain(w, fmt.Sprintf("%s generation %d", ref, rec.Generation))
				if target != nil {
					target.explain(w, fmt.Sprintf("after the reshard (generation %d)", rec.State.To))
				}
				return nil
			})
		},
	}
}
