package render

import (
	"slices"
	"strconv"
	"strings"
)

// The PgDog database names the renderer derives from a record's database name <db>. The
// record's own rule (shardmap: router.name must not contain "__") keeps them apart from
// <db> itself, and the branch rules keep branches apart from the other two.

// ReshardDatabase names the reshard destination rendered while a record at generation g
// is resharding or cutting over: the database PgDog's RESHARD copies into and CUTOVER
// swaps with <db>. Clients never connect to it.
func ReshardDatabase(db string, g uint64) string {
	return db + "__reshard_" + strconv.FormatUint(g, 10)
}

// BranchDatabase names a branch of <db>: a copy of the database with the same layout on
// its own backends, which clients reach as <db>__<branch>.
func BranchDatabase(db, branch string) string { return db + "__" + branch }

// GenerationUser is the user of the generation marker: a users.toml entry with no
// password, so PgDog creates its pools but never opens a connection for them, and no
// client can log in as it. Application user names may not start with "__loam".
const GenerationUser = "__loam_generation"

const generationInfix = "__generation_"

// GenerationDatabase names the marker database of <db> at generation g, <db>__generation_<g>.
//
// PgDog reports no config generation (SHOW CONFIG covers [general] only), so the renderer
// makes the generation visible through what SHOW POOLS does report: one row per pool, and
// a pool exists for each (users.toml user, pgdog.toml database) pair. pgdog.toml carries a
// [[databases]] entry named GenerationDatabase(db, g) and users.toml a [[users]] entry
// GenerationUser with database = GenerationDatabase(db, g). Both names carry g, one in each
// file, so SHOW POOLS lists a row (database = <db>__generation_<g>, user = __loam_generation)
// exactly when the instance has loaded both files of generation g: with pgdog.toml of one
// generation and users.toml of another, the user points at a database that does not exist
// and there is no marker row at all. GenerationFromPools reads it back.
func GenerationDatabase(db string, g uint64) string {
	return db + generationInfix + strconv.FormatUint(g, 10)
}

// ParseGenerationDatabase is the inverse of GenerationDatabase. It accepts only what
// GenerationDatabase produces: a non-empty <db> without "__", and a generation written in
// canonical decimal (no sign, no leading zero, at least 1, at most 2^64-1).
func ParseGenerationDatabase(name string) (db string, g uint64, ok bool) {
	i := strings.LastIndex(name, generationInfix)
	if i <= 0 {
		return "", 0, false
	}
	db, digits := name[:i], name[i+len(generationInfix):]
	if strings.Contains(db, "__") || digits == "" || digits[0] == '0' {
		return "", 0, false
	}
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return "", 0, false
		}
	}
	g, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return db, g, true
}

// PoolRow is the part of a SHOW POOLS row that the rendered files decide: the columns
// database, user, addr, port, shard and role.
type PoolRow struct {
	Database string
	User     string
	Addr     string
	Port     uint16
	Shard    uint32
	Role     string // "primary" or "replica"
}

// GenerationError says that SHOW POOLS shows more than one generation marker for one
// database, which the rendered files never produce (each carries exactly one): something
// other than Loam wrote the instance's files.
type GenerationError struct {
	Database    string
	Generations []uint64
}

func (e *GenerationError) Error() string {
	gs := make([]string, len(e.Generations))
	for i, g := range e.Generations {
		gs[i] = strconv.FormatUint(g, 10)
	}
	return "render: SHOW POOLS shows generation markers " + strings.Join(gs, ", ") + " for database " +
		strconv.Quote(e.Database) + "; Loam's files carry exactly one, so these files were not all rendered by Loam"
}

// GenerationFromPools reads the generation of db's files from an instance's SHOW POOLS
// rows: the g of the rows whose user is GenerationUser and whose database is
// GenerationDatabase(db, g). known is false when no row carries a marker for db (the
// instance runs files Loam did not render, or a pgdog.toml and a users.toml of different
// generations). The marker says which files the instance loaded; it does not see an
// in-memory CUTOVER, after which PgDog routes db to what the files call the reshard
// destination. To tell that apart, compare the rows with ExpectedPools.
func GenerationFromPools(db string, rows []PoolRow) (g uint64, known bool, err error) {
	var seen []uint64
	for _, r := range rows {
		if r.User != GenerationUser {
			continue
		}
		d, gen, ok := ParseGenerationDatabase(r.Database)
		if !ok || d != db {
			continue
		}
		if !slices.Contains(seen, gen) {
			seen = append(seen, gen)
		}
	}
	switch len(seen) {
	case 0:
		return 0, false, nil
	case 1:
		return seen[0], true, nil
	}
	slices.Sort(seen)
	return 0, false, &GenerationError{Database: db, Generations: seen}
}
