package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
)

func newMapCmd(c *cli) *cobra.Command {
	m := &cobra.Command{Use: "map", Short: "Create, show, validate and change shard map records"}

	initCmd := &cobra.Command{
		Use:   "init <db> --file record.json",
		Short: "Create a database's shard map record from a JSON file",
		Example: `  loamrouter map init app --file app.json
  loamrouter map init app --example   # a 2-shard hash-sharded example on 127.0.0.1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := recordFromFlags(cmd, args[0])
			if err != nil {
				return err
			}
			s, err := c.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			v, err := s.CAS(cmd.Context(), c.db(args[0]), 0, rec)
			if errors.Is(err, adapters.ErrConflict) {
				return fmt.Errorf("%w (use `map apply` to change an existing record)", err)
			}
			if err != nil {
				return err
			}
			_ = c.audit(s).Append(cmd.Context(), driver.AuditEntry{Event: driver.AuditAction, ID: c.db(args[0]).String(), What: fmt.Sprintf("map init: version %d generation %d", v, rec.Generation), Result: "ok"})
			return c.emit(cmd.OutOrStdout(), map[string]any{"db": c.db(args[0]).String(), "version": v, "generation": rec.Generation}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "created %s version %d generation %d\n", c.db(args[0]), v, rec.Generation)
				return err
			})
		},
	}
	initCmd.Flags().String("file", "", "JSON record to create (see `map show` for the format)")
	initCmd.Flags().Bool("example", false, "create an example 2-shard record instead of reading --file")

	show := &cobra.Command{
		Use:     "show <db>",
		Short:   "Print a database's shard map record as JSON",
		Example: "  loamrouter map show app\n  loamrouter map show app > app.json   # edit, then `map apply app --file app.json`",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			rec, err := s.Read(cmd.Context(), c.db(args[0]))
			if err != nil {
				return fmt.Errorf("%s: %w", c.db(args[0]), err)
			}
			return printJSON(cmd.OutOrStdout(), rec)
		},
	}

	validate := &cobra.Command{
		Use:     "validate --file record.json",
		Short:   "Check a JSON record without storing it; every problem names its field",
		Example: "  loamrouter map validate --file app.json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := recordFromFlags(cmd, "")
			if err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), map[string]any{"ok": true, "router": rec.Router.Kind.String(), "name": rec.Router.Name, "shards": len(rec.Shards), "generation": rec.Generation}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "ok: %s %q, %d shards, generation %d\n", rec.Router.Kind, rec.Router.Name, len(rec.Shards), rec.Generation)
				return err
			})
		},
	}
	validate.Flags().String("file", "", "JSON record to check")
	validate.Flags().Bool("example", false, "check the example record")

	apply := &cobra.Command{
		Use:   "apply <db> --file record.json",
		Short: "Replace a database's record by compare-and-set; the running daemon pushes a new generation",
		Long: `apply stores the record in --file over the current one, by compare-and-set on the
version it read (or on --expect-version), so two operators cannot overwrite each other. The
record must pass validation and be a valid successor of the stored one (generations only
grow; a routing change needs a new generation). A daemon watching the database pushes the
new generation to every router.`,
		Example: `  loamrouter map show app > app.json && $EDITOR app.json
  loamrouter map apply app --file app.json
  loamrouter map apply app --file app.json --expect-version 7`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := recordFromFlags(cmd, args[0])
			if err != nil {
				return err
			}
			s, err := c.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			ref := c.db(args[0])
			expect, _ := cmd.Flags().GetUint64("expect-version")
			var before *shardmap.Record
			if expect == 0 {
				before, err = s.Read(cmd.Context(), ref)
				if err != nil {
					return fmt.Errorf("%s: %w (use `map init` to create it)", ref, err)
				}
				expect = before.Version
			}
			v, err := s.CAS(cmd.Context(), ref, expect, rec)
			if err != nil {
				return fmt.Errorf("%s: %w", ref, err)
			}
			what := fmt.Sprintf("map apply: version %d → %d, generation %d", expect, v, rec.Generation)
			if before != nil && before.Generation != rec.Generation {
				what = fmt.Sprintf("map apply: version %d → %d, generation %d → %d", expect, v, before.Generation, rec.Generation)
			}
			_ = c.audit(s).Append(cmd.Context(), driver.AuditEntry{Event: driver.AuditAction, ID: ref.String(), What: what, Result: "ok"})
			return c.emit(cmd.OutOrStdout(), map[string]any{"db": ref.String(), "version": v, "generation": rec.Generation}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "stored %s version %d generation %d\n", ref, v, rec.Generation)
				return err
			})
		},
	}
	apply.Flags().String("file", "", "JSON record to store")
	apply.Flags().Uint64("expect-version", 0, "the version the store must hold (default: the one read just before)")
	m.AddCommand(initCmd, show, validate, apply)
	return m
}

// exampleRecord is a 2-shard PgDog database hash-sharded on a bigint column.
func exampleRecord(db string) *shardmap.Record {
	return shardmap.NewPgHash(db, shardmap.Key{Column: "customer_id", Type: shardmap.Bigint, Tables: []string{"orders"}},
		shardmap.Backend{Host: "127.0.0.1", Port: 5432, Database: db},
		shardmap.Backend{Host: "127.0.0.1", Port: 5433, Database: db})
}

func recordFromFlags(cmd *cobra.Command, db string) (*shardmap.Record, error) {
	if ex, _ := cmd.Flags().GetBool("example"); ex {
		if db == "" {
			db = "app"
		}
		return exampleRecord(db), nil
	}
	path, _ := cmd.Flags().GetString("file")
	if path == "" {
		return nil, errors.New("give --file record.json (or --example)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rec shardmap.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := rec.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if db != "" && rec.Router.Name != db {
		return nil, fmt.Errorf("%s: router.name is %q but the command names %q", path, rec.Router.Name, db)
	}
	return &rec, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
