package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters/configmap"
	"loam.dev/router/controller"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

func newRenderCmd(c *cli) *cobra.Command {
	r := &cobra.Command{
		Use:   "render",
		Short: "Render a record into the routers' files (pgdog.toml and users.toml, or a VSchema)",
		Long: `render writes the files the routers would load for the record's current generation,
byte for byte as the daemon writes them. Credentials come from the database's [[databases]]
table in loam.toml (secrets from the environment variables it names). Without --out the
files are printed, secrets redacted in users.toml unless --show-secrets.`,
	}
	mk := func(kind shardmap.RouterKind, use, example string) *cobra.Command {
		cmd := &cobra.Command{
			Use:     use,
			Short:   "Render " + kind.String() + " files for <db>",
			Example: example,
			Args:    cobra.ExactArgs(1),
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
				if rec.Router.Kind != kind {
					return fmt.Errorf("%s is routed by %s, not %s (use `render %s`)", ref, rec.Router.Kind, kind, map[shardmap.RouterKind]string{shardmap.PgDog: "pgdog", shardmap.Vitess: "vschema"}[rec.Router.Kind])
				}
				d, ok := c.cfg.Database(ref)
				if !ok {
					return fmt.Errorf("%s has no [[databases]] table in %s: the files need its logins (app_user, admin_password_env, ...)", ref, c.cfg.Source())
				}
				files, err := controller.RenderFiles(rec, d)
				if err != nil {
					return err
				}
				out, _ := cmd.Flags().GetString("out")
				if out != "" {
					if err := os.MkdirAll(out, configmap.DirMode); err != nil {
						return err
					}
					for _, f := range files {
						if err := os.WriteFile(filepath.Join(out, f.Name), f.Data, configmap.FileMode); err != nil {
							return err
						}
					}
				}
				show, _ := cmd.Flags().GetBool("show-secrets")
				type file struct {
					Name string `json:"name"`
					Data string `json:"data,omitempty"`
				}
				var list []file
				for _, f := range files {
					data := string(f.Data)
					if out != "" || (!show && f.Name != render.PgDogConfigFile && kind == shardmap.PgDog) {
						data = ""
					}
					list = append(list, file{f.Name, data})
				}
				return c.emit(cmd.OutOrStdout(), map[string]any{"db": ref.String(), "generation": rec.Generation, "out": out, "files": list}, func(w io.Writer) error {
					for _, f := range list {
						switch {
						case out != "":
							fmt.Fprintf(w, "wrote %s\n", filepath.Join(out, f.Name))
						case f.Data == "":
							fmt.Fprintf(w, "# %s: holds secrets; --show-secrets prints it\n", f.Name)
						default:
							fmt.Fprintf(w, "# %s (generation %d)\n%s", f.Name, rec.Generation, f.Data)
						}
					}
					return nil
				})
			},
		}
		cmd.Flags().String("out", "", "write the files into this directory instead of printing them")
		cmd.Flags().Bool("show-secrets", false, "print files that hold passwords")
		return cmd
	}
	r.AddCommand(
		mk(shardmap.PgDog, "pgdog <db>", "  loamrouter render pgdog app\n  loamrouter render pgdog app --out /etc/pgdog"),
		mk(shardmap.Vitess, "vschema <keyspace>", "  loamrouter render vschema customer --out ./vschema"),
	)
	return r
}
