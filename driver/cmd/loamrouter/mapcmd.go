package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/kernel/shardmap"
)

func openStore(cmd *cobra.Command) (*boltstore.Store, error) {
	dir, _ := cmd.Flags().GetString("data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--data %s: %w", dir, err)
	}
	return boltstore.Open(filepath.Join(dir, "loam.db"), nil)
}

func dbRef(cmd *cobra.Command, db string) adapters.DBRef {
	ns, _ := cmd.Flags().GetString("namespace")
	return adapters.DBRef{Namespace: ns, Database: db}
}

func newMapCmd() *cobra.Command {
	m := &cobra.Command{Use: "map", Short: "Create, show and validate shard map records"}
	m.PersistentFlags().String("namespace", "default", "namespace of the record (records live under xs/<namespace>/<db>)")

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
			s, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			v, err := s.CAS(cmd.Context(), dbRef(cmd, args[0]), 0, rec)
			if errors.Is(err, adapters.ErrConflict) {
				return fmt.Errorf("%w (use `map apply` to change an existing record)", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s version %d generation %d\n", dbRef(cmd, args[0]), v, rec.Generation)
			return nil
		},
	}
	initCmd.Flags().String("file", "", "JSON record to create (see `map show` for the format)")
	initCmd.Flags().Bool("example", false, "create an example 2-shard record instead of reading --file")

	show := &cobra.Command{
		Use:     "show <db>",
		Short:   "Print a database's shard map record as JSON",
		Example: "  loamrouter map show app",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			rec, err := s.Read(cmd.Context(), dbRef(cmd, args[0]))
			if err != nil {
				return fmt.Errorf("%s: %w", dbRef(cmd, args[0]), err)
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
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %s %q, %d shards, generation %d\n", rec.Router.Kind, rec.Router.Name, len(rec.Shards), rec.Generation)
			return nil
		},
	}
	validate.Flags().String("file", "", "JSON record to check")
	validate.Flags().Bool("example", false, "check the example record")
	m.AddCommand(initCmd, show, validate)
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
