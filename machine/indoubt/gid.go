package indoubt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// GIDPrefix starts every prepared transaction name PgDog's two-phase commit gives.
const GIDPrefix = "__pgdog_2pc_"

// Errors of ParseGID. A gid that fails with ErrNotPgDog or ErrMalformed is not PgDog's: the
// monitor cannot know its coordinator and reports it as foreign.
var (
	// ErrNotPgDog: the gid does not start with GIDPrefix (another coordinator's, such as an
	// application's own PREPARE TRANSACTION).
	ErrNotPgDog = errors.New("indoubt: not a PgDog gid")
	// ErrMalformed: the gid starts with GIDPrefix but does not end in _<random>_<shard>
	// (two decimal numbers) after a non-empty instance id, so PgDog did not write it.
	ErrMalformed = errors.New("indoubt: malformed PgDog gid")
	// ErrOtherDeployment: a PgDog gid whose deployment is not the one given to ParseGID; its
	// coordinator belongs to another PgDog deployment (or one without DEPLOYMENT_ID).
	ErrOtherDeployment = errors.New("indoubt: PgDog gid of another deployment")
)

// GID is a parsed PgDog prepared-transaction name:
//
//	__pgdog_2pc_[<DEPLOYMENT_ID>_]<instance>_<random>_<shard>
//
// where instance is the coordinator's NODE_ID, or 8 random hex digits drawn per process
// when NODE_ID is unset; random is a decimal uint64 naming the transaction; shard is the
// position of the shard among the transaction's bound shards (reference/pgdog.md §4).
type GID struct {
	Deployment string
	Instance   string
	Random     uint64
	Shard      uint64
	// Txn is the gid without its "_<shard>" suffix: one name for the transaction on every
	// shard, as PgDog's SHOW TRANSACTIONS shows it.
	Txn string
}

// ParseGID parses gid from the right, since both the deployment id and the instance id may
// contain '_'. deployment is the DEPLOYMENT_ID the database's PgDog runs with ("" when it
// runs without one): the split between deployment and instance cannot be found from the gid
// alone, so with deployment "" everything between the prefix and _<random>_<shard> is taken
// as the instance id, and with a deployment a gid that does not carry it fails with
// ErrOtherDeployment (the GID is still returned, with that middle part as Instance).
func ParseGID(gid, deployment string) (GID, error) {
	rest, ok := strings.CutPrefix(gid, GIDPrefix)
	if !ok {
		return GID{}, fmt.Errorf("%w: %q does not start with %s", ErrNotPgDog, gid, GIDPrefix)
	}
	mid, shard, ok := cutLastNumber(rest)
	if !ok {
		return GID{}, fmt.Errorf("%w: %q does not end in _<shard>", ErrMalformed, gid)
	}
	mid, random, ok := cutLastNumber(mid)
	if !ok {
		return GID{}, fmt.Errorf("%w: %q does not end in _<random>_<shard>", ErrMalformed, gid)
	}
	if mid == "" {
		return GID{}, fmt.Errorf("%w: %q has no instance id", ErrMalformed, gid)
	}
	g := GID{Instance: mid, Random: random, Shard: shard, Txn: gid[:strings.LastIndexByte(gid, '_')]}
	if deployment == "" {
		return g, nil
	}
	inst, ok := strings.CutPrefix(mid, deployment+"_")
	if !ok || inst == "" {
		return g, fmt.Errorf("%w: %q does not carry deployment %q", ErrOtherDeployment, gid, deployment)
	}
	g.Deployment, g.Instance = deployment, inst
	return g, nil
}

// cutLastNumber splits "<head>_<digits>" into head and the number. ParseUint in base 10
// takes nothing but decimal digits (no sign, no '_', not empty), so it is the whole check
// of the digits. (make mutate: a loop over the digits and a test for an empty tail, both
// before it, could be mutated freely: they refused nothing ParseUint lets through.)
func cutLastNumber(s string) (string, uint64, bool) {
	i := strings.LastIndexByte(s, '_')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return s[:i], n, true
}
