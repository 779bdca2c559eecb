package render

import (
	"testing"
	"time"

	gotoml "github.com/pelletier/go-toml/v2"
)

// bench256 is a 256-shard hash record, each shard with a replica, two key tables, two
// application users and a schema admin: 513 [[databases]] entries and 517 [[users]].
func bench256(b *testing.B) (Files, func() (Files, error)) {
	rec := hashRecord(256, true)
	cr, opts := creds(), PgDogOptions{TLS: tlsOpts()}
	render := func() (Files, error) { return PgDog(rec, cr, opts) }
	fs, err := render()
	if err != nil {
		b.Fatal(err)
	}
	return fs, render
}

// BenchmarkPgDog256 renders pgdog.toml and users.toml for a 256-shard record (validation
// included). The x-gotoml metric is its time over go-toml's Marshal of the same two
// documents (decoded from the rendered files), measured in the same run: a general TOML
// encoder as the reference for what writing this much TOML costs.
func BenchmarkPgDog256(b *testing.B) {
	fs, render := bench256(b)
	cfg, _ := fs.Get(PgDogConfigFile)
	users, _ := fs.Get(PgDogUsersFile)
	var cfgDoc, usersDoc map[string]any
	if err := gotoml.Unmarshal(cfg.Data, &cfgDoc); err != nil {
		b.Fatal(err)
	}
	if err := gotoml.Unmarshal(users.Data, &usersDoc); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := render(); err != nil {
			b.Fatal(err)
		}
	}
	ours := b.Elapsed()
	// The baseline runs as many times, after the timed loop (testing.Benchmark cannot be
	// nested in a benchmark), so both figures come from the same process and machine state.
	start := time.Now()
	for range b.N {
		if _, err := gotoml.Marshal(cfgDoc); err != nil {
			b.Fatal(err)
		}
		if _, err := gotoml.Marshal(usersDoc); err != nil {
			b.Fatal(err)
		}
	}
	base := time.Since(start)
	b.ReportMetric(float64(ours.Nanoseconds())/1e3/float64(b.N), "µs/op")
	b.ReportMetric(float64(ours)/float64(base), "x-gotoml")
	b.ReportMetric(float64(len(cfg.Data)+len(users.Data)), "bytes/render")
}
