package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/driver"
)

func newAuditCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log: every step a controller executed and every operator action (who, what, when, result)",
		Long: `audit reads the append-only audit log from the store. Each executed command has two
entries: exec (before it ran) and result (after, with "ok" or the error and the duration).
Operator actions (map apply, cutover start, ...) and lease changes are entries too. Entries
carry the lease epoch they ran under, so a takeover shows as a new epoch. An entry written
through a store server or a daemon's API also says "by <credential>": the identity the
server authenticated (a credential's name or a client certificate's subject), which the
writer cannot choose; the holder before it is what the writer says of itself.`,
		Example: `  loamrouter audit
  loamrouter audit --machine cutover --id default/app
  loamrouter audit --since 1h --output json | jq .`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := driver.AuditFilter{}
			f.Machine, _ = cmd.Flags().GetString("machine")
			f.ID, _ = cmd.Flags().GetString("id")
			f.Limit, _ = cmd.Flags().GetInt("limit")
			if since, _ := cmd.Flags().GetDuration("since"); since > 0 {
				f.Since = time.Now().Add(-since)
			}
			s, err := c.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			entries, err := driver.ReadAudit(cmd.Context(), s, f)
			if err != nil {
				return err
			}
			if entries == nil {
				entries = []driver.AuditEntry{}
			}
			return c.emit(cmd.OutOrStdout(), entries, func(w io.Writer) error {
				for _, e := range entries {
					fmt.Fprintln(w, formatAudit(e))
				}
				return nil
			})
		},
	}
	cmd.Flags().String("machine", "", "only this machine kind (configpush, indoubt, cutover, failover, fencemigrate)")
	cmd.Flags().String("id", "", "only this machine id (<namespace>/<db>)")
	cmd.Flags().Duration("since", 0, "only entries newer than this (e.g. 1h)")
	cmd.Flags().Int("limit", 0, "only the last N entries")
	return cmd
}

func formatAudit(e driver.AuditEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-22s", time.UnixMilli(e.At).Format("2006-01-02 15:04:05.000"), driver.Token{Holder: e.Holder, Epoch: e.Epoch})
	if e.Who != "" {
		fmt.Fprintf(&b, " by %s", e.Who) // the identity the store server authenticated
	}
	if e.Machine != "" {
		fmt.Fprintf(&b, " %s %s", e.Machine, e.ID)
	} else if e.ID != "" {
		fmt.Fprintf(&b, " %s", e.ID)
	}
	fmt.Fprintf(&b, "  %-7s %s", e.Event, e.What)
	if e.Result != "" && e.Event != driver.AuditExec {
		fmt.Fprintf(&b, "  → %s", e.Result)
	}
	if e.DurationMS > 0 {
		fmt.Fprintf(&b, " (%dms)", e.DurationMS)
	}
	return b.String()
}
