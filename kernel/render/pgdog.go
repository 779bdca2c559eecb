package render

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"loam.dev/router/kernel/shardmap"
)

// The files PgDog reads (its defaults for --config and --users).
const (
	PgDogConfigFile = "pgdog.toml"
	PgDogUsersFile  = "users.toml"
)

// PgDogOptions are the deployment choices that are not in the shard map record.
type PgDogOptions struct {
	TLS TLS
	// Branches are copies of the database on their own backends, reached by clients as
	// <db>__<branch> (BranchDatabase). Each is rendered with the record's current scheme.
	Branches []Branch
	// CheckoutTimeout is how long a query may wait for a server connection before PgDog
	// fails it (checkout_timeout, whole milliseconds; 0 leaves PgDog's default, 5 s). It is
	// also how long a write of an instance a cutover missed waits on a fenced shard, whose
	// logins fail, before it is refused.
	CheckoutTimeout time.Duration
}

// Branch is one branch of the database.
type Branch struct {
	// Name matches [a-z][a-z0-9_]* without "__" (PgDog lowercases admin commands, so
	// PAUSE and RESUME can name only lower-case databases) and does not start with
	// "reshard_" or "generation_", which name the reshard destination and the marker.
	Name string
	// Backends are the branch's backends, one per shard of the record's current layout,
	// in shard order.
	Backends []shardmap.Backend
}

// TLS is both hops: clients to PgDog, and PgDog to the shards. The zero value with the
// paths filled in is the secure setup: PgDog presents Certificate, refuses clients without
// TLS, and verifies every shard's certificate and host name against ServerCA.
type TLS struct {
	// Insecure renders no TLS key at all: clients may connect in plaintext and PgDog's
	// default for servers (tls_verify = "prefer": TLS if offered, unverified) applies.
	// For development only; every path below must then be empty.
	Insecure bool
	// Certificate and PrivateKey are the PEM files PgDog presents to clients
	// (tls_certificate, tls_private_key); tls_client_required is rendered true.
	Certificate string
	PrivateKey  string
	// ServerCA is the PEM bundle PgDog verifies the shards' certificates against
	// (tls_server_ca_certificate).
	ServerCA string
	// ServerVerify is how much of the shard's certificate PgDog checks (tls_verify).
	ServerVerify ServerVerify
}

// ServerVerify is PgDog's tls_verify for connections to the shards. Only the verifying
// modes exist here; TLS.Insecure is the one way to not verify.
type ServerVerify uint8

const (
	// VerifyFull checks the chain against ServerCA and the host name (tls_verify = "verify_full").
	VerifyFull ServerVerify = iota
	// VerifyCA checks the chain only (tls_verify = "verify_ca"), for shards reached by
	// addresses their certificates do not name.
	VerifyCA
)

var serverVerifyNames = []string{VerifyFull: "verify_full", VerifyCA: "verify_ca"}

// PgDog renders pgdog.toml and users.toml for a record whose router is PgDog:
//
//   - [general]: auth_type = "scram" (SCRAM ends in PgDog), passthrough_auth = "disabled",
//     cutover_save_config = false (the record, not PgDog's disk, is the truth),
//     checkout_timeout when PgDogOptions.CheckoutTimeout is set, and TLS.
//   - [[databases]]: for <db>, one entry per shard with shard = i and role = "primary",
//     and one role = "replica" entry per replica; the same for the reshard destination
//     ReshardDatabase(db, generation) from record.Target while the record is resharding
//     or cutting over, and for each branch BranchDatabase(db, name); then the generation
//     marker GenerationDatabase(db, generation) (see there).
//   - [[sharded_tables]]: per database, one entry per key table (one without a name when
//     the key lists no table), with column and data_type (bigint and integer keys are
//     "bigint", text "varchar", uuid "uuid"). Range and list schemes add their rules as
//     [[sharded_tables.mapping]] entries, plus the default rule when there is one. The
//     top-level [[sharded_mappings]] form is deprecated in PgDog (it logs a warning on
//     every load) and is never rendered.
//   - users.toml: [admin] with the admin login, then per user one [[users]] entry for
//     each database it is on (database = ..., never databases = [...], because PgDog's
//     CUTOVER swaps only the single database field), sorted by user name, then the marker.
//
// Every key rendered is one PgDog's config types accept (they reject unknown keys); no
// secret is written to pgdog.toml. A record that fails Validate is refused with its
// validation error; a text list value or range bound that PgDog would read as a UUID is
// refused (a text key never matches it there).
func PgDog(rec *shardmap.Record, creds Credentials, opts PgDogOptions) (Files, error) {
	m, err := buildPgDog(rec, creds, opts)
	if err != nil {
		return nil, err
	}
	return NewFiles(
		File{Name: PgDogConfigFile, Data: m.appendConfig(make([]byte, 0, m.configSize()))},
		File{Name: PgDogUsersFile, Data: m.appendUsers(make([]byte, 0, m.usersSize()))},
	)
}

// ExpectedPools lists the SHOW POOLS rows (database, user, addr, port, shard, role) that
// PgDog shows once it has loaded the files PgDog renders for the same inputs: one row per
// user entry, per database entry of that user's database. The marker rows are included.
// Rows are sorted by database, user, shard, role, addr and port; PgDog prints them in no
// particular order, so compare as sets. An instance that ran CUTOVER in memory shows the
// <db> and reshard-destination addresses swapped against this list.
func ExpectedPools(rec *shardmap.Record, creds Credentials, opts PgDogOptions) ([]PoolRow, error) {
	m, err := buildPgDog(rec, creds, opts)
	if err != nil {
		return nil, err
	}
	var rows []PoolRow
	for _, u := range m.users {
		for _, d := range m.dbs {
			if d.name == u.database {
				rows = append(rows, PoolRow{Database: d.name, User: u.name, Addr: d.host, Port: d.port, Shard: d.shard, Role: d.role})
			}
		}
	}
	slices.SortFunc(rows, func(a, b PoolRow) int {
		return cmp.Or(strings.Compare(a.Database, b.Database), strings.Compare(a.User, b.User),
			cmp.Compare(a.Shard, b.Shard), strings.Compare(a.Role, b.Role),
			strings.Compare(a.Addr, b.Addr), cmp.Compare(a.Port, b.Port))
	})
	return rows, nil
}

// pgdogModel is the content of both files, built and checked before a byte is written.
type pgdogModel struct {
	db         string
	generation uint64
	tls        TLS
	checkoutMS int64 // 0: not rendered
	adminUser  string
	adminPass  Secret
	dbs        []pgDatabase
	tables     []pgTable
	users      []pgUser
}

type pgDatabase struct {
	name   string
	shard  uint32
	role   string
	host   string
	port   uint16
	dbname string
}

type pgTable struct {
	database string
	name     string // "" = every table with the column
	column   string
	dataType string
	rules    []pgRule
}

// pgRule is one [[sharded_tables.mapping]] entry: a list rule (values), a range rule
// (start and/or end) or the default rule (neither).
type pgRule struct {
	values     []shardmap.Value
	start, end *shardmap.Value
	shard      uint32
}

type pgUser struct {
	name        string
	database    string
	password    Secret // "" only for the marker
	schemaAdmin bool
	marker      bool
}

func buildPgDog(rec *shardmap.Record, creds Credentials, opts PgDogOptions) (*pgdogModel, error) {
	if err := checkRecord(rec, shardmap.PgDog); err != nil {
		return nil, err
	}
	var p problems
	m := &pgdogModel{db: rec.Router.Name, generation: rec.Generation, tls: opts.TLS, checkoutMS: opts.CheckoutTimeout.Milliseconds()}
	checkTLS(&p, opts.TLS)
	if opts.CheckoutTimeout < 0 || opts.CheckoutTimeout > 0 && m.checkoutMS == 0 {
		p.add("options.checkout_timeout", "is %v; want 0 (PgDog's default) or at least a millisecond", opts.CheckoutTimeout)
	}
	m.adminUser, m.adminPass = checkAdmin(&p, creds.Admin)
	appUsers := checkUsers(&p, creds)

	resharding := rec.State.Phase == shardmap.Resharding || rec.State.Phase == shardmap.CuttingOver
	if resharding && creds.SchemaAdmin.Name == "" {
		p.add("credentials.schema_admin", "is missing; the record is %v, and PgDog's resharding commands need a schema_admin user on %s and %s",
			rec.State.Phase, m.db, ReshardDatabase(m.db, m.generation))
	}

	// Client-facing databases, in file order: <db>, the reshard destination, branches.
	type named struct {
		name        string
		layout      shardmap.Layout
		field       string // where its scheme is in the record, for errors; "" = checked already
		schemaAdmin bool   // the schema admin is on it (the database and the reshard destination)
	}
	targets := []named{{m.db, rec.Layout, "record.", true}}
	if resharding && rec.Target != nil {
		targets = append(targets, named{ReshardDatabase(m.db, m.generation), *rec.Target, "record.target.", true})
	}
	for _, b := range checkBranches(&p, rec, opts.Branches) {
		targets = append(targets, named{BranchDatabase(m.db, b.Name), branchLayout(rec.Layout, b), "", false})
	}
	n := 1
	for _, t := range targets {
		for _, s := range t.layout.Shards {
			n += 1 + len(s.Backend.Replicas)
		}
	}
	m.dbs = make([]pgDatabase, 0, n)
	for _, t := range targets {
		m.addLayout(t.name, t.layout)
	}
	for _, t := range targets {
		m.addTables(&p, t.name, t.field, t.layout.Scheme)
	}
	marker := GenerationDatabase(m.db, m.generation)
	s0 := rec.Shards[0].Backend
	// The marker entry needs a host, and gets shard 0's primary: its only user has no
	// password, so PgDog never connects to it.
	m.dbs = append(m.dbs, pgDatabase{name: marker, shard: 0, role: "primary", host: s0.Host, port: s0.Port, dbname: s0.Database})

	m.users = make([]pgUser, 0, (len(appUsers)+1)*len(targets)+1)
	for _, u := range appUsers {
		for _, t := range targets {
			m.users = append(m.users, pgUser{name: u.Name, database: t.name, password: u.Password})
		}
	}
	if creds.SchemaAdmin.Name != "" {
		for _, t := range targets {
			if t.schemaAdmin {
				m.users = append(m.users, pgUser{name: creds.SchemaAdmin.Name, database: t.name, password: creds.SchemaAdmin.Password, schemaAdmin: true})
			}
		}
	}
	slices.SortStableFunc(m.users, func(a, b pgUser) int { return strings.Compare(a.name, b.name) })
	m.users = append(m.users, pgUser{name: GenerationUser, database: marker, marker: true})

	if err := p.err(); err != nil {
		return nil, err
	}
	return m, nil
}

// checkRecord refuses a nil record, a record that fails validation (with its own error)
// and a record for the other router.
func checkRecord(rec *shardmap.Record, want shardmap.RouterKind) error {
	if rec == nil {
		return &InputErrors{Problems: []*InputError{{Field: "record", Reason: "is nil"}}}
	}
	if err := rec.Validate(); err != nil {
		return fmt.Errorf("render: refusing a record that fails validation: %w", err)
	}
	if rec.Router.Kind != want {
		use := "PgDog"
		if rec.Router.Kind == shardmap.Vitess {
			use = "Vitess"
		}
		return &InputErrors{Problems: []*InputError{{Field: "record.router.kind",
			Reason: fmt.Sprintf("is %v, not %v; render it with %s", rec.Router.Kind, want, use)}}}
	}
	return nil
}

func checkTLS(p *problems, t TLS) {
	if t.Insecure {
		if t.Certificate != "" || t.PrivateKey != "" || t.ServerCA != "" {
			p.add("options.tls", "is insecure but names certificate files; either drop Insecure or the paths")
		}
		return
	}
	p.text("options.tls.certificate", t.Certificate)
	p.text("options.tls.private_key", t.PrivateKey)
	p.text("options.tls.server_ca", t.ServerCA)
	if int(t.ServerVerify) >= len(serverVerifyNames) {
		p.add("options.tls.server_verify", "is %d; want VerifyFull or VerifyCA", t.ServerVerify)
	}
}

func checkAdmin(p *problems, a Admin) (string, Secret) {
	user := a.User
	if user == "" {
		user = "admin"
	}
	p.text("credentials.admin.user", user)
	p.secret("credentials.admin.password", a.Password)
	return user, a.Password
}

// checkUsers checks the application users and the schema admin, and returns the
// application users sorted by name.
func checkUsers(p *problems, c Credentials) []User {
	if len(c.Users) == 0 {
		p.add("credentials.users", "is empty; give at least one application user")
	}
	seen := map[string]string{}
	check := func(f string, u User) {
		if p.text(f+".name", u.Name) {
			switch {
			case strings.HasPrefix(u.Name, "__loam"):
				p.add(f+".name", "%q starts with \"__loam\", which is reserved for the generation marker", u.Name)
			case seen[u.Name] != "":
				p.add(f+".name", "%q is also %s; user names must be unique", u.Name, seen[u.Name])
			default:
				seen[u.Name] = f
			}
		}
		p.secret(f+".password", u.Password)
		for j, g := range u.Groups {
			p.text(fmt.Sprintf("%s.groups[%d]", f, j), g)
		}
	}
	for i, u := range c.Users {
		check(fmt.Sprintf("credentials.users[%d]", i), u)
	}
	if c.SchemaAdmin.Name != "" || c.SchemaAdmin.Password != "" {
		check("credentials.schema_admin", c.SchemaAdmin)
	}
	out := slices.Clone(c.Users)
	slices.SortStableFunc(out, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// checkBranches checks each branch and returns them sorted by name.
func checkBranches(p *problems, rec *shardmap.Record, bs []Branch) []Branch {
	seen := map[string]int{}
	for i, b := range bs {
		f := fmt.Sprintf("options.branches[%d]", i)
		switch {
		case !isBranchName(b.Name):
			p.add(f+".name", "%q must match [a-z][a-z0-9_]* without \"__\" (PgDog lowercases admin commands)", b.Name)
		case strings.HasPrefix(b.Name, "reshard_"), strings.HasPrefix(b.Name, "generation_"):
			p.add(f+".name", "%q starts with a prefix reserved for the reshard destination or the generation marker", b.Name)
		default:
			if j, dup := seen[b.Name]; dup {
				p.add(f+".name", "%q is also options.branches[%d]; branch names must be unique", b.Name, j)
			}
			seen[b.Name] = i
		}
		if len(b.Backends) != len(rec.Shards) {
			p.add(f+".backends", "has %d backends for %d shards; give one per shard, in shard order", len(b.Backends), len(rec.Shards))
			continue
		}
		// The branch's backends get the record's own checks, through a record that
		// differs from rec only in them.
		probe := &shardmap.Record{Generation: rec.Generation, Engine: rec.Engine, Router: rec.Router,
			Layout: branchLayout(rec.Layout, b), State: shardmap.State{Phase: shardmap.Serving}}
		if err := probe.Validate(); err != nil {
			var ve *shardmap.ValidationError
			if errors.As(err, &ve) {
				for _, fe := range ve.Problems {
					field := strings.Replace(strings.Replace(fe.Field, "shards[", "backends[", 1), "].backend", "]", 1)
					p.add(f+"."+field, "%s", fe.Reason)
				}
			} else {
				p.add(f, "%v", err)
			}
		}
	}
	// Only branches with a backend per shard are returned, so that the caller can lay
	// them out; the others are reported above and fail the call.
	out := slices.DeleteFunc(slices.Clone(bs), func(b Branch) bool { return len(b.Backends) != len(rec.Shards) })
	slices.SortFunc(out, func(a, b Branch) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func isBranchName(s string) bool {
	if s == "" || strings.Contains(s, "__") {
		return false
	}
	for i, c := range s {
		if !(c >= 'a' && c <= 'z' || i > 0 && (c == '_' || c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

func branchLayout(l shardmap.Layout, b Branch) shardmap.Layout {
	out := shardmap.Layout{Scheme: l.Scheme, Shards: make([]shardmap.Shard, len(l.Shards))}
	for i, s := range l.Shards {
		s.Backend = b.Backends[i]
		out.Shards[i] = s
	}
	return out
}

func (m *pgdogModel) addLayout(name string, l shardmap.Layout) {
	for i, s := range l.Shards {
		b := s.Backend
		m.dbs = append(m.dbs, pgDatabase{name: name, shard: uint32(i), role: "primary", host: b.Host, port: b.Port, dbname: b.Database})
		for _, r := range b.Replicas {
			m.dbs = append(m.dbs, pgDatabase{name: name, shard: uint32(i), role: "replica", host: r.Host, port: r.Port, dbname: b.Database})
		}
	}
}

var pgDataTypes = map[shardmap.KeyType]string{
	shardmap.Bigint: "bigint", shardmap.Integer: "bigint", shardmap.Text: "varchar", shardmap.UUID: "uuid",
}

func (m *pgdogModel) addTables(p *problems, database, field string, s shardmap.Scheme) {
	k := s.ShardKey()
	checkText := k.Type == shardmap.Text && field != ""
	var rules []pgRule
	switch s := s.(type) {
	case shardmap.PgRange:
		catchAll := false
		for i, r := range s.Ranges {
			if checkText {
				checkNotUUID(p, fmt.Sprintf("%sscheme.ranges[%d].start", field, i), r.Start)
				checkNotUUID(p, fmt.Sprintf("%sscheme.ranges[%d].end", field, i), r.End)
			}
			// A rule with neither bound is PgDog's default rule; it takes every key,
			// so the record's Default (never reached) is not rendered after it.
			catchAll = catchAll || r.Start == nil && r.End == nil
			rules = append(rules, pgRule{start: r.Start, end: r.End, shard: r.Shard})
		}
		if s.Default != nil && !catchAll {
			rules = append(rules, pgRule{shard: *s.Default})
		}
	case shardmap.PgList:
		for i, l := range s.Lists {
			if checkText {
				for j, v := range l.Values {
					checkNotUUID(p, fmt.Sprintf("%sscheme.lists[%d].values[%d]", field, i, j), &v)
				}
			}
			rules = append(rules, pgRule{values: l.Values, shard: l.Shard})
		}
		if s.Default != nil {
			rules = append(rules, pgRule{shard: *s.Default})
		}
	}
	t := pgTable{database: database, column: k.Column, dataType: pgDataTypes[k.Type], rules: rules}
	if len(k.Tables) == 0 {
		m.tables = append(m.tables, t)
		return
	}
	for _, name := range k.Tables {
		t.name = name
		m.tables = append(m.tables, t)
	}
}

// checkNotUUID refuses a text value that PgDog's config would read as a UUID. PgDog keeps
// mapping values as integer, UUID or string, trying them in that order, and the UUID parser
// it uses takes 32 hex digits, the hyphenated 8-4-4-4-12 form, and either of those in
// braces or after "urn:uuid:". A text key's value is a string there, and a string never
// equals or compares with a UUID, so such a rule would silently never match.
func checkNotUUID(p *problems, field string, v *shardmap.Value) {
	if v != nil && v.IsText() && looksLikeUUID(v.AsText()) {
		p.add(field, "%s would be read by PgDog as a UUID, and a text key never matches a UUID rule; change the value or key the table by uuid", v)
	}
}

func looksLikeUUID(s string) bool {
	if len(s) >= 9 && strings.EqualFold(s[:9], "urn:uuid:") {
		s = s[9:]
	} else if len(s) >= 2 && s[0] == '{' && s[len(s)-1] == '}' {
		s = s[1 : len(s)-1]
	}
	isHex := func(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
	switch len(s) {
	case 32:
		for i := 0; i < 32; i++ {
			if !isHex(s[i]) {
				return false
			}
		}
		return true
	case 36:
		for i := 0; i < 36; i++ {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if s[i] != '-' {
					return false
				}
			} else if !isHex(s[i]) {
				return false
			}
		}
		return true
	}
	return false
}

func (m *pgdogModel) header(w *tomlWriter, what string) {
	w.comment(fmt.Sprintf("%s for PgDog, rendered by loam.dev/router from the shard map of %q at generation %d.", what, m.db, m.generation))
	w.comment("Do not edit: the next generation replaces this file. PgDog reports no config generation;")
	w.comment(fmt.Sprintf("SHOW POOLS shows database %q, user %q once both files are loaded.", GenerationDatabase(m.db, m.generation), GenerationUser))
}

func (m *pgdogModel) appendConfig(b []byte) []byte {
	w := tomlWriter{b: b}
	m.header(&w, "pgdog.toml")
	w.table("general")
	w.str("auth_type", "scram")
	w.str("passthrough_auth", "disabled")
	w.bool("cutover_save_config", false)
	if m.checkoutMS > 0 {
		w.int("checkout_timeout", m.checkoutMS)
	}
	if !m.tls.Insecure {
		w.str("tls_certificate", m.tls.Certificate)
		w.str("tls_private_key", m.tls.PrivateKey)
		w.bool("tls_client_required", true)
		w.str("tls_verify", serverVerifyNames[m.tls.ServerVerify])
		w.str("tls_server_ca_certificate", m.tls.ServerCA)
	}
	for _, d := range m.dbs {
		w.arrayTable("databases")
		w.str("name", d.name)
		w.int("shard", int64(d.shard))
		w.str("role", d.role)
		w.str("host", d.host)
		w.int("port", int64(d.port))
		w.str("database_name", d.dbname)
	}
	for _, t := range m.tables {
		w.arrayTable("sharded_tables")
		w.str("database", t.database)
		if t.name != "" {
			w.str("name", t.name)
		}
		w.str("column", t.column)
		w.str("data_type", t.dataType)
		for _, r := range t.rules {
			w.arrayTable("sharded_tables.mapping")
			switch {
			case r.values != nil:
				w.key("values")
				w.b = append(w.b, '[')
				for i, v := range r.values {
					if i > 0 {
						w.b = append(w.b, ", "...)
					}
					w.b = appendValue(w.b, v)
				}
				w.b = append(w.b, "]\n"...)
			default:
				if r.start != nil {
					w.key("start")
					w.b = append(appendValue(w.b, *r.start), '\n')
				}
				if r.end != nil {
					w.key("end")
					w.b = append(appendValue(w.b, *r.end), '\n')
				}
			}
			w.int("shard", int64(r.shard))
		}
	}
	return w.b
}

func appendValue(b []byte, v shardmap.Value) []byte {
	if v.IsText() {
		return appendTOMLString(b, v.AsText())
	}
	return strconv.AppendInt(b, v.AsInt(), 10)
}

func (m *pgdogModel) appendUsers(b []byte) []byte {
	w := tomlWriter{b: b}
	m.header(&w, "users.toml")
	w.table("admin")
	w.str("user", m.adminUser)
	w.str("password", string(m.adminPass))
	for _, u := range m.users {
		if u.marker {
			w.b = append(w.b, '\n')
			w.comment("The generation marker: no password, so PgDog opens no connection for it and no client logs in.")
			w.b = append(w.b, "[[users]]\n"...)
		} else {
			w.arrayTable("users")
		}
		w.str("name", u.name)
		w.str("database", u.database)
		if !u.marker {
			w.str("password", string(u.password))
		}
		if u.schemaAdmin {
			w.bool("schema_admin", true)
		}
	}
	return w.b
}

// configSize and usersSize estimate the output size, so rendering allocates once.
func (m *pgdogModel) configSize() int {
	n := 1024 + 160*len(m.dbs)
	for _, t := range m.tables {
		n += 128 + 48*len(t.rules)
		for _, r := range t.rules {
			n += 24 * len(r.values)
		}
	}
	return n
}

func (m *pgdogModel) usersSize() int { return 512 + 128*len(m.users) }
