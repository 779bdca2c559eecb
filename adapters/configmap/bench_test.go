package configmap_test

import (
	"context"
	"path/filepath"
	"testing"

	"loam.dev/router/adapters/configmap"
)

// BenchmarkWriteFiles: one generation of two files written, made durable and swapped in.
// Most of it is fsync; the figure depends on the disk.
func BenchmarkWriteFiles(b *testing.B) {
	d, err := configmap.NewDir(filepath.Join(b.TempDir(), "pgdog"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	g := uint64(0)
	for b.Loop() {
		g++
		if err := d.WriteFiles(ctx, g, gen(b, g)); err != nil {
			b.Fatal(err)
		}
	}
}
