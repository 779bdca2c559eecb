package configmap_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/kernel/render"
)

// A development directory that PgDog is started with (pgdog --config <dir>/pgdog.toml
// --users <dir>/users.toml): each generation replaces the last, and a late write of an
// older one is refused.
func ExampleDir() {
	tmp, _ := os.MkdirTemp("", "loam-example-")
	defer os.RemoveAll(tmp)
	dir, _ := configmap.NewDir(filepath.Join(tmp, "pgdog"))
	files := func(g int) render.Files {
		fs, _ := render.NewFiles(
			render.File{Name: "pgdog.toml", Data: fmt.Appendf(nil, "# generation %d\n", g)},
			render.File{Name: "users.toml", Data: []byte("[[users]]\n")})
		return fs
	}
	ctx := context.Background()
	fmt.Println(dir.WriteFiles(ctx, 4, files(4)))
	fmt.Println(dir.WriteFiles(ctx, 5, files(5)))
	err := dir.WriteFiles(ctx, 4, files(4))
	fmt.Println(errors.Is(err, adapters.ErrNewerGeneration))
	b, _ := os.ReadFile(filepath.Join(dir.Path(), "pgdog.toml"))
	g, _ := dir.Generation()
	fmt.Printf("%s%d\n", b, g)
	// Output:
	// <nil>
	// <nil>
	// true
	// # generation 5
	// 5
}
