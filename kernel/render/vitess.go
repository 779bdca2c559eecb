package render

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"loam.dev/router/kernel/shardmap"
)

// VtgateAuthFile is the name of vtgate's static auth file (--mysql-auth-server-static-file).
const VtgateAuthFile = "vtgate_auth.json"

// VSchemaFile names the VSchema file of a keyspace: <keyspace>.vschema.json.
func VSchemaFile(keyspace string) string { return keyspace + ".vschema.json" }

// VitessOptions are the VSchema choices that are not in the shard map record.
type VitessOptions struct {
	// AutoIncrement gives tables a column filled from a Vitess sequence.
	AutoIncrement []AutoIncrement
}

// AutoIncrement fills Column of Table from Sequence, a sequence table in an unsharded
// keyspace, written "keyspace.table" (or "table" when vtgate can resolve it unqualified).
// The sequence table itself is declared ("type": "sequence") in that keyspace's VSchema,
// which is not this record's.
type AutoIncrement struct {
	Table    string
	Column   string
	Sequence string
}

// Vitess renders the keyspace's VSchema (VSchemaFile) and vtgate's static auth file
// (VtgateAuthFile) for a record whose router is Vitess.
//
// The VSchema is sharded, with one vindex named after its type ("hash" or "xxhash") and,
// for every key table, that vindex on the key column as the primary (first) column vindex,
// plus auto_increment where the options give one. It lists tables explicitly, so a key
// without tables is refused: a sharded keyspace routes only the tables its VSchema names.
// Shards do not appear: vtgate takes them from the topology (SrvKeyspace).
//
// The auth file maps each user (the application users and the schema admin) to one entry
// with the password as MysqlNativePassword ("*" + upper-case hex SHA1(SHA1(password)), for
// mysql_native_password) and CachingSha2Password ("*" + hex SHA256(SHA256(password)), for
// caching_sha2_password), never in plain text; UserData is the user name and Groups its
// ACL groups. Credentials.Admin is PgDog's and is not used here.
//
// Output is JSON with sorted keys and two-space indentation, so equal inputs give equal bytes.
func Vitess(rec *shardmap.Record, creds Credentials, opts VitessOptions) (Files, error) {
	if err := checkRecord(rec, shardmap.Vitess); err != nil {
		return nil, err
	}
	var p problems
	vs := buildVSchema(&p, rec, opts)
	users := checkUsers(&p, Credentials{Users: creds.Users, SchemaAdmin: creds.SchemaAdmin})
	if creds.SchemaAdmin.Name != "" {
		users = append(users, creds.SchemaAdmin)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	auth := map[string][]authEntry{}
	for _, u := range users {
		auth[u.Name] = []authEntry{{
			MysqlNativePassword: MysqlNativePasswordHash(u.Password),
			CachingSha2Password: CachingSha2PasswordHash(u.Password),
			UserData:            u.Name,
			Groups:              u.Groups,
		}}
	}
	vsJSON, err := marshalJSON(vs)
	if err != nil {
		return nil, err
	}
	authJSON, err := marshalJSON(auth)
	if err != nil {
		return nil, err
	}
	return NewFiles(
		File{Name: VSchemaFile(rec.Router.Name), Data: vsJSON},
		File{Name: VtgateAuthFile, Data: authJSON},
	)
}

// MysqlNativePasswordHash is what vtgate's static auth file takes as MysqlNativePassword:
// "*" and the upper-case hex of SHA1(SHA1(password)), as MySQL's PASSWORD() printed it.
func MysqlNativePasswordHash(password Secret) string {
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	return "*" + strings.ToUpper(hex.EncodeToString(h2[:]))
}

// CachingSha2PasswordHash is what vtgate's static auth file takes as CachingSha2Password:
// "*" and the hex of SHA256(SHA256(password)).
func CachingSha2PasswordHash(password Secret) string {
	h1 := sha256.Sum256([]byte(password))
	h2 := sha256.Sum256(h1[:])
	return "*" + hex.EncodeToString(h2[:])
}

// The JSON shapes. Field order is the output order; maps are written sorted by key.

type vschemaJSON struct {
	Sharded  bool                  `json:"sharded"`
	Vindexes map[string]vindexJSON `json:"vindexes"`
	Tables   map[string]tableJSON  `json:"tables"`
}

type vindexJSON struct {
	Type string `json:"type"`
}

type tableJSON struct {
	ColumnVindexes []columnVindexJSON `json:"column_vindexes"`
	AutoIncrement  *autoIncrementJSON `json:"auto_increment,omitempty"`
}

type columnVindexJSON struct {
	Column string `json:"column"`
	Name   string `json:"name"`
}

type autoIncrementJSON struct {
	Column   string `json:"column"`
	Sequence string `json:"sequence"`
}

// authEntry is one entry of vtgate's static auth file; the names are vtgate's Go field
// names, which its decoder matches.
type authEntry struct {
	MysqlNativePassword string   `json:"MysqlNativePassword"`
	CachingSha2Password string   `json:"CachingSha2Password"`
	UserData            string   `json:"UserData"`
	Groups              []string `json:"Groups,omitempty"`
}

func buildVSchema(p *problems, rec *shardmap.Record, opts VitessOptions) vschemaJSON {
	s := rec.Scheme.(shardmap.Vindex) // Validate guarantees a vindex scheme for Vitess
	name := s.Kind.String()
	vs := vschemaJSON{
		Sharded:  true,
		Vindexes: map[string]vindexJSON{name: {Type: name}},
		Tables:   map[string]tableJSON{},
	}
	if len(s.Key.Tables) == 0 {
		p.add("record.scheme.key.tables", "is empty; a sharded VSchema routes only the tables it lists, so list the tables keyed by %q", s.Key.Column)
	}
	for _, t := range s.Key.Tables {
		vs.Tables[t] = tableJSON{ColumnVindexes: []columnVindexJSON{{Column: s.Key.Column, Name: name}}}
	}
	for i, a := range opts.AutoIncrement {
		f := fmt.Sprintf("options.auto_increment[%d]", i)
		p.text(f+".column", a.Column)
		p.text(f+".sequence", a.Sequence)
		t, ok := vs.Tables[a.Table]
		switch {
		case !ok:
			p.add(f+".table", "%q is not a key table of the record (%v); auto_increment applies to tables in this VSchema", a.Table, s.Key.Tables)
		case t.AutoIncrement != nil:
			p.add(f+".table", "%q has an auto_increment already; a table has at most one", a.Table)
		default:
			t.AutoIncrement = &autoIncrementJSON{Column: a.Column, Sequence: a.Sequence}
			vs.Tables[a.Table] = t
		}
	}
	return vs
}

// marshalJSON writes v as indented JSON without HTML escaping (names are shown as they
// are, "<" and all) and with a final newline.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("render: encoding JSON: %w", err)
	}
	return slices.Clip(buf.Bytes()), nil
}
