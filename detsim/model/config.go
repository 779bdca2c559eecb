package model

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// ConfigFile is the name of the one file the simulated routers read.
const ConfigFile = "router.conf"

// Config is what a router instance loads from its files: the generation they were rendered
// for and, per database name, the backends of its shards in order. During a reshard the
// destination is a second database, <db>__reshard_<g>, rendered at generation g and unused by
// clients until CUTOVER swaps it in.
//
// The simulated routers read a small line format of their own instead of pgdog.toml: what the
// simulator checks is when files are written and read, not PgDog's syntax, which the
// renderer's golden tests and the real-PgDog tests cover.
type Config struct {
	Generation uint64
	Databases  map[string][]string // database → backend node name per shard
	TwoPC      bool
}

// ErrBadConfig is wrapped by ParseConfig's errors.
var ErrBadConfig = errors.New("model: bad router config")

// ReshardName is the destination database's name during the reshard to generation g+1.
func ReshardName(db string, g uint64) string { return db + "__reshard_" + strconv.FormatUint(g, 10) }

// Render renders rec as the simulated routers' files. Backend.Host names the backend node.
func Render(rec *shardmap.Record, twoPC bool) render.Files {
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d\n", rec.Generation)
	db := rec.Router.Name
	line := func(name string, l shardmap.Layout) {
		b.WriteString("database " + name)
		for _, s := range l.Shards {
			b.WriteString(" " + s.Backend.Host)
		}
		b.WriteByte('\n')
	}
	line(db, rec.Layout)
	if rec.Target != nil {
		line(ReshardName(db, rec.Generation), *rec.Target)
	}
	if twoPC {
		b.WriteString("two_phase_commit on\n")
	}
	fs, err := render.NewFiles(render.File{Name: ConfigFile, Data: []byte(b.String())})
	if err != nil {
		panic(err) // one fixed, valid name
	}
	return fs
}

// ParseConfig reads the files back. It is strict: a router that cannot parse its files
// keeps what it had.
func ParseConfig(fs render.Files) (Config, error) {
	f, ok := fs.Get(ConfigFile)
	if !ok {
		return Config{}, fmt.Errorf("%w: no %s among %v", ErrBadConfig, ConfigFile, fs.Names())
	}
	c := Config{Databases: map[string][]string{}}
	sawGen := false
	for i, line := range strings.Split(strings.TrimSuffix(string(f.Data), "\n"), "\n") {
		fields := strings.Fields(line)
		bad := func(format string, a ...any) (Config, error) {
			return Config{}, fmt.Errorf("%w: %s line %d: %s", ErrBadConfig, ConfigFile, i+1, fmt.Sprintf(format, a...))
		}
		if len(fields) == 0 {
			return bad("empty line")
		}
		switch fields[0] {
		case "generation":
			g, err := strconv.ParseUint(strings.Join(fields[1:], " "), 10, 64)
			if err != nil || sawGen || g == 0 {
				return bad("generation must appear once, as a positive integer")
			}
			c.Generation, sawGen = g, true
		case "database":
			if len(fields) < 3 {
				return bad("database needs a name and at least one backend")
			}
			if _, dup := c.Databases[fields[1]]; dup {
				return bad("database %q appears twice", fields[1])
			}
			c.Databases[fields[1]] = fields[2:]
		case "two_phase_commit":
			if len(fields) != 2 || fields[1] != "on" {
				return bad("two_phase_commit takes only \"on\"")
			}
			c.TwoPC = true
		default:
			return bad("unknown directive %q", fields[0])
		}
	}
	if !sawGen {
		return Config{}, fmt.Errorf("%w: %s has no generation line", ErrBadConfig, ConfigFile)
	}
	return c, nil
}

// Route picks the shard of a text key among n as PgDog does: Postgres hash partitioning
// (kernel/pghash).
func Route(key string, n int) int { return int(pghash.ShardOfText(key, uint64(n))) }
