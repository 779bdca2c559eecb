package refrouter

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/pelletier/go-toml/v2"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// The files PgDog reads when started without --config and --users; the reference router
// reads the same two names from its directory.
const (
	ConfigFile = "pgdog.toml"
	UsersFile  = "users.toml"
)

// ErrBadFiles marks files the router cannot route by. Like PgDog's RELOAD, a reload that
// fails with it keeps the routing that was loaded before.
var ErrBadFiles = errors.New("refrouter: cannot route by these files")

// Topology is what the router loads from pgdog.toml and users.toml: per database, the
// primary of each shard, the sharding key, and the users that may log in to it.
type Topology struct {
	Databases map[string]*Database
	// markers lists, per client database, the generations whose marker (see
	// render.GenerationDatabase) is complete: a [[databases]] entry in pgdog.toml and a
	// render.GenerationUser entry on it in users.toml.
	markers map[string][]uint64
	// Admin is the [admin] table (users.toml's wins over pgdog.toml's, as in PgDog): the
	// login of the admin database the router serves (Server). Without a password the admin
	// database takes no login.
	Admin AdminLogin
}

// AdminLogin is the [admin] table: database name and user (both default "admin") and
// password.
type AdminLogin struct {
	Name     string `toml:"name"`
	User     string `toml:"user"`
	Password string `toml:"password"`
}

// Database is one [[databases]] name: the shards clients of that name are routed over.
type Database struct {
	Name string
	// Shards holds the primary of shard i at index i. The count is the highest shard
	// number plus one, as PgDog counts it, so a gap leaves a nil entry (a shard with no
	// backend: a key routed there fails).
	Shards []*Backend
	// Scheme is how statements pick a shard, from the database's [[sharded_tables]]
	// entries; nil for a database without one (routable only when it has one shard).
	Scheme shardmap.Scheme
	// Users maps a users.toml user name to its password for this database.
	Users map[string]string
	// Tables are the [[sharded_tables]] names of the database (the resharding stand-in
	// publishes them).
	Tables []string

	layout shardmap.Layout // Scheme over len(Shards) shards, for Locate; set by ParseFiles
}

// Backend is the primary of one shard.
type Backend struct {
	Host     string
	Port     uint16
	Database string // database_name, defaulting to the entry's name as in PgDog
	// User and Password override users.toml for the connection to this server.
	User, Password string
}

func (b *Backend) String() string {
	return b.Host + ":" + strconv.Itoa(int(b.Port)) + "/" + b.Database
}

// Generation returns the generation of the files loaded for client database db: the g of
// the complete marker render.GenerationDatabase(db, g). known is false when the files carry
// no complete marker for db or more than one.
func (t *Topology) Generation(db string) (g uint64, known bool) {
	if t == nil || len(t.markers[db]) != 1 {
		return 0, false
	}
	return t.markers[db][0], true
}

// The parts of PgDog's two files the router reads. Keys it does not use are ignored: PgDog
// itself rejects unknown keys, which is the renderer's concern, tested there.
type configTOML struct {
	Databases []struct {
		Name         string `toml:"name"`
		Host         string `toml:"host"`
		Port         *int64 `toml:"port"`
		Role         string `toml:"role"`
		Shard        *int64 `toml:"shard"`
		DatabaseName string `toml:"database_name"`
		User         string `toml:"user"`
		Password     string `toml:"password"`
	} `toml:"databases"`
	ShardedTables []tableTOML `toml:"sharded_tables"`
	Admin         *AdminLogin `toml:"admin"`
}

type tableTOML struct {
	Database string `toml:"database"`
	Name     string `toml:"name"`
	Column   string `toml:"column"`
	DataType string `toml:"data_type"`
	Hasher   string `toml:"hasher"`
	Mapping  []struct {
		Values []any  `toml:"values"`
		Start  any    `toml:"start"`
		End    any    `toml:"end"`
		Shard  *int64 `toml:"shard"`
	} `toml:"mapping"`
}

type usersTOML struct {
	Admin *AdminLogin `toml:"admin"`
	Users []struct {
		Name     string `toml:"name"`
		Database string `toml:"database"`
		Password string `toml:"password"`
	} `toml:"users"`
}

// ReadDir loads the topology from dir's pgdog.toml and users.toml. A missing file counts
// as empty, as PgDog falls back to its defaults (no databases) with a warning.
func ReadDir(dir string) (*Topology, error) {
	var fs []render.File
	for _, name := range []string{ConfigFile, UsersFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("refrouter: reading %s: %w", filepath.Join(dir, name), err)
		}
		fs = append(fs, render.File{Name: name, Data: data})
	}
	files, err := render.NewFiles(fs...)
	if err != nil {
		return nil, err
	}
	return ParseFiles(files)
}

// ParseFiles loads the topology from rendered files (pgdog.toml and users.toml; others are
// ignored). Errors wrap ErrBadFiles and name the file and entry at fault.
func ParseFiles(files render.Files) (*Topology, error) {
	var c configTOML
	var u usersTOML
	if f, ok := files.Get(ConfigFile); ok {
		if err := toml.Unmarshal(f.Data, &c); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadFiles, ConfigFile, err)
		}
	}
	if f, ok := files.Get(UsersFile); ok {
		if err := toml.Unmarshal(f.Data, &u); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadFiles, UsersFile, err)
		}
	}
	t := &Topology{Databases: map[string]*Database{}, markers: map[string][]uint64{}}
	for i, d := range c.Databases {
		field := fmt.Sprintf("%s: databases[%d]", ConfigFile, i)
		if d.Name == "" {
			return nil, fmt.Errorf("%w: %s has no name", ErrBadFiles, field)
		}
		role := d.Role
		if role == "" {
			role = "primary"
		}
		shard, port := int64(0), int64(5432)
		if d.Shard != nil {
			shard = *d.Shard
		}
		if d.Port != nil {
			port = *d.Port
		}
		if shard < 0 || shard > 1<<16 {
			return nil, fmt.Errorf("%w: %s: shard %d is out of range", ErrBadFiles, field, shard)
		}
		if port <= 0 || port > 65535 {
			return nil, fmt.Errorf("%w: %s: port %d is out of range", ErrBadFiles, field, port)
		}
		db := t.Databases[d.Name]
		if db == nil {
			db = &Database{Name: d.Name, Users: map[string]string{}}
			t.Databases[d.Name] = db
		}
		for int64(len(db.Shards)) <= shard {
			db.Shards = append(db.Shards, nil)
		}
		switch role {
		case "primary":
		case "replica":
			continue // the reference router sends everything to primaries
		default:
			return nil, fmt.Errorf("%w: %s: role %q: the reference router routes by explicit roles only (primary, replica)", ErrBadFiles, field, role)
		}
		if db.Shards[shard] != nil {
			return nil, fmt.Errorf("%w: %s: a second primary for shard %d of %q", ErrBadFiles, field, shard, d.Name)
		}
		name := d.DatabaseName
		if name == "" {
			name = d.Name
		}
		if d.Host == "" {
			return nil, fmt.Errorf("%w: %s has no host", ErrBadFiles, field)
		}
		db.Shards[shard] = &Backend{Host: d.Host, Port: uint16(port), Database: name, User: d.User, Password: d.Password}
	}
	seen := map[string]bool{}
	for i, tb := range c.ShardedTables {
		field := fmt.Sprintf("%s: sharded_tables[%d]", ConfigFile, i)
		db := t.Databases[tb.Database]
		if db == nil {
			return nil, fmt.Errorf("%w: %s: database %q has no [[databases]] entry", ErrBadFiles, field, tb.Database)
		}
		sc, err := parseScheme(field, tb, len(db.Shards))
		if err != nil {
			return nil, err
		}
		if seen[tb.Database] && !sameScheme(db.Scheme, sc) {
			return nil, fmt.Errorf("%w: %s: database %q already has a key with another column, type or mapping; the reference router routes a database by one key", ErrBadFiles, field, tb.Database)
		}
		seen[tb.Database], db.Scheme = true, sc
		if tb.Name != "" && !slices.Contains(db.Tables, tb.Name) {
			db.Tables = append(db.Tables, tb.Name)
		}
	}
	for _, usr := range u.Users {
		if d, g, ok := render.ParseGenerationDatabase(usr.Database); ok && usr.Name == render.GenerationUser {
			if _, loaded := t.Databases[usr.Database]; loaded && !slices.Contains(t.markers[d], g) {
				t.markers[d] = append(t.markers[d], g)
			}
			continue
		}
		if db := t.Databases[usr.Database]; db != nil {
			db.Users[usr.Name] = usr.Password
		}
	}
	for _, gs := range t.markers {
		slices.Sort(gs)
	}
	for _, a := range []*AdminLogin{c.Admin, u.Admin} {
		if a != nil {
			t.Admin = *a
		}
	}
	t.Admin.Name, t.Admin.User = cmp.Or(t.Admin.Name, "admin"), cmp.Or(t.Admin.User, "admin")
	for _, db := range t.Databases {
		db.layout = shardmap.Layout{Scheme: db.Scheme, Shards: make([]shardmap.Shard, len(db.Shards))}
	}
	return t, nil
}

// Names lists the databases, sorted.
func (t *Topology) Names() []string { return slices.Sorted(maps.Keys(t.Databases)) }
