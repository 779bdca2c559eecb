package shardmap

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"loam.dev/router/kernel/keyrange"
)

// ErrInvalid is matched (errors.Is) by every validation error.
var ErrInvalid = errors.New("shardmap: invalid record")

// FieldError is one problem, with the path of the field it is about, such as
// "scheme.ranges[2].start" or "shards[3].name".
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true for a single FieldError too.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// ValidationError lists every problem found; errors.As finds each *FieldError.
type ValidationError struct {
	Problems []*FieldError
}

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return "shardmap: " + e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "shardmap: %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Unwrap exposes each problem to errors.As.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

type problems struct{ list []*FieldError }

func (p *problems) add(field, format string, a ...any) {
	p.list = append(p.list, &FieldError{Field: field, Reason: fmt.Sprintf(format, a...)})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: p.list}
}

// Validate checks the record on its own and reports every problem it finds, each naming
// its field. It does not check Version, which belongs to the store.
func (r *Record) Validate() error {
	var p problems
	if r.Generation == 0 {
		p.add("generation", "is 0; generations start at 1")
	}
	if !valid(engineNames, r.Engine) {
		p.add("engine", "is %v; want postgres or mysql", r.Engine)
	}
	switch {
	case !valid(routerNames, r.Router.Kind):
		p.add("router.kind", "is %v; want pgdog or vitess", r.Router.Kind)
	case r.Router.Kind == PgDog && r.Engine == MySQL, r.Router.Kind == Vitess && r.Engine == Postgres:
		p.add("router.kind", "%v cannot route engine %v (PgDog routes postgres, Vitess routes mysql)", r.Router.Kind, r.Engine)
	}
	checkRouterName(&p, r.Router)
	checkLayout(&p, "", r.Router.Kind, r.Engine, r.Layout)
	checkState(&p, r)
	return p.err()
}

// ValidateNext checks the change from prev (the record in the store) to r (the record
// about to replace it), after r.Validate(). Routing may change only with a new generation,
// generations never go backwards, and a record stays the record of one database.
func (r *Record) ValidateNext(prev *Record) error {
	var p problems
	if r.Router != prev.Router {
		p.add("router", "changes from %v %q to %v %q; a record belongs to one database for ever (create a new one)", prev.Router.Kind, prev.Router.Name, r.Router.Kind, r.Router.Name)
	}
	if r.Engine != prev.Engine {
		p.add("engine", "changes from %v to %v; a record belongs to one engine for ever", prev.Engine, r.Engine)
	}
	switch {
	case r.Generation < prev.Generation:
		p.add("generation", "goes backwards from %d to %d; generations are never reused", prev.Generation, r.Generation)
	case r.Generation == prev.Generation:
		if field := routingDiff(prev.Layout, r.Layout); field != "" {
			p.add("generation", "stays %d although routing changes (%s); bump the generation so routers can tell the layouts apart", r.Generation, field)
		} else if field := targetDiff(prev.Target, r.Target); field != "" {
			p.add("generation", "stays %d although routing changes (%s); bump the generation so routers can tell the layouts apart", r.Generation, field)
		}
	}
	return p.err()
}

// targetDiff names the first difference between two reshard targets that changes the
// routers' files: the target is rendered as the reshard destination database, so adding,
// removing or changing it is a new generation just like a change of the layout.
func targetDiff(a, b *Layout) string {
	switch {
	case a == nil && b == nil:
		return ""
	case a == nil:
		return "target added"
	case b == nil:
		return "target removed"
	}
	if f := routingDiff(*a, *b); f != "" {
		return "target." + f
	}
	return ""
}

// routingDiff names the first difference that changes where a key is routed, or "".
// Fences do not change routing: the fence is enforced in the backend.
func routingDiff(a, b Layout) string {
	ea, _ := appendScheme(nil, a.Scheme)
	eb, _ := appendScheme(nil, b.Scheme)
	if string(ea) != string(eb) {
		return "scheme"
	}
	if len(a.Shards) != len(b.Shards) {
		return "shards: count"
	}
	for i := range a.Shards {
		x, y := a.Shards[i], b.Shards[i]
		if x.Name != y.Name {
			return fmt.Sprintf("shards[%d].name", i)
		}
		bx, by := appendBackend(nil, x.Backend), appendBackend(nil, y.Backend)
		if string(bx) != string(by) {
			return fmt.Sprintf("shards[%d].backend", i)
		}
	}
	return ""
}

func checkRouterName(p *problems, r Router) {
	n := r.Name
	switch {
	case n == "":
		p.add("router.name", "is empty; name the PgDog database or Vitess keyspace")
	case len(n) > 63:
		p.add("router.name", "%q is %d bytes; names are at most 63 bytes (Postgres identifiers)", n, len(n))
	case r.Kind == PgDog && !isLowerIdent(n):
		p.add("router.name", "%q must match [a-z_][a-z0-9_]*: PgDog lowercases every admin command, so PAUSE and RESUME can only name lower-case databases", n)
	case r.Kind == PgDog && strings.Contains(n, "__"):
		p.add("router.name", "%q contains \"__\", which is reserved for <db>__<branch> and <db>__reshard_<g> names", n)
	case r.Kind == Vitess && !isKeyspaceName(n):
		p.add("router.name", "%q must match [A-Za-z0-9_-]+ (a Vitess keyspace name)", n)
	}
}

func isLowerIdent(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

func isKeyspaceName(s string) bool {
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// IsHost reports whether s is a DNS name (labels of letters, digits, '-' and '_' of 1 to
// 63 bytes, at most 253 bytes in all, an IPv4 literal included) or an IPv6 literal without
// brackets or zone. A host is pasted into connection strings (libpq reads "a,b" as two
// hosts, "u@h" as a login, "h/db?x=y" as a path and parameters), so nothing else is one.
func IsHost(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	if strings.Contains(s, ":") {
		return isIPv6(s)
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

// isIPv6 checks the shape of an IPv6 literal: eight groups of 1 to 4 hex digits, or fewer
// around one "::", the last two optionally a dotted IPv4 address.
func isIPv6(s string) bool {
	double := strings.Contains(s, "::")
	if strings.Count(s, "::") > 1 || strings.Contains(s, ":::") ||
		strings.HasPrefix(s, ":") && !strings.HasPrefix(s, "::") || strings.HasSuffix(s, ":") && !strings.HasSuffix(s, "::") {
		return false
	}
	groups := strings.Split(s, ":")
	n := 0
	for i, g := range groups {
		switch {
		case g == "":
			continue // the "::"
		case i == len(groups)-1 && strings.Contains(g, "."):
			parts := strings.Split(g, ".")
			if len(parts) != 4 {
				return false
			}
			for _, p := range parts {
				if p == "" || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
					return false
				}
			}
			n += 2
		case len(g) > 4 || strings.Trim(g, "0123456789abcdefABCDEF") != "":
			return false
		default:
			n++
		}
	}
	return n == 8 && !double || n < 8 && double
}

// isToken: non-empty, printable ASCII without spaces or quotes, at most 255 bytes.
func isToken(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '\\' {
			return false
		}
	}
	return true
}

func checkLayout(p *problems, prefix string, kind RouterKind, engine Engine, l Layout) {
	if len(l.Shards) == 0 {
		p.add(prefix+"shards", "is empty; a layout has at least one shard")
	}
	firstIndex := make(map[string]int, len(l.Shards))
	for i, s := range l.Shards {
		// Field paths are formatted only for a problem: a 256-shard record validates
		// without allocating per shard.
		f := func() string { return fmt.Sprintf("%sshards[%d]", prefix, i) }
		switch j, dup := firstIndex[s.Name]; {
		case !isToken(s.Name) || len(s.Name) > 63:
			p.add(f()+".name", "%q must be 1 to 63 printable characters without spaces or quotes", s.Name)
		case dup:
			p.add(f()+".name", "%q is used twice (also %sshards[%d]); names must be unique", s.Name, prefix, j)
		default:
			firstIndex[s.Name] = i
		}
		if !valid(fenceNames, s.Fence) {
			p.add(f()+".fence", "is %v; want open or writes", s.Fence)
		}
		b := s.Backend
		if !IsHost(b.Host) {
			p.add(f()+".backend.host", "%q must be a host name or address: a DNS name or an IP literal, without , @ / ? [ or a port (libpq reads a comma as a list of hosts)", b.Host)
		}
		if b.Port == 0 {
			p.add(f()+".backend.port", "is 0; give the server's port")
		}
		if engine == Postgres && !isToken(b.Database) {
			p.add(f()+".backend.database", "%q must name the database on the server", b.Database)
		}
		if b.Database != "" && !isToken(b.Database) {
			p.add(f()+".backend.database", "%q must be printable without spaces or quotes", b.Database)
		}
		if b.Tablet != "" && !isToken(b.Tablet) {
			p.add(f()+".backend.tablet", "%q must be a tablet alias such as zone1-0000000100", b.Tablet)
		}
		if kind == PgDog && b.Tablet != "" {
			p.add(f()+".backend.tablet", "is set for a PgDog database; tablets exist only behind Vitess")
		}
		primary := Endpoint{b.Host, b.Port}
		for j, e := range b.Replicas {
			rf := fmt.Sprintf("%s.backend.replicas[%d]", f(), j)
			switch {
			case !IsHost(e.Host):
				p.add(rf+".host", "%q must be a DNS name or an IP literal, without , @ / ? [ or a port", e.Host)
			case e.Port == 0:
				p.add(rf, "%q must be host:port with a non-zero port", e.String())
			}
			if e == primary {
				p.add(rf, "%s is the primary itself", e)
			}
			if slices.Contains(b.Replicas[:j], e) {
				p.add(rf, "%s is listed twice", e)
			}
		}
	}
	sf := prefix + "scheme"
	n := len(l.Shards)
	switch s := l.Scheme.(type) {
	case nil:
		p.add(sf, "is missing; choose pg_hash, pg_range, pg_list or vindex")
	case PgHash:
		checkPgKey(p, sf, kind, s.Key)
		if int(s.Shards) != n {
			p.add(sf+".shards", "is %d but the layout has %d shards; the hash modulus must equal the shard count", s.Shards, n)
		}
	case PgRange:
		checkPgKey(p, sf, kind, s.Key)
		if s.Key.Type == UUID {
			p.add(sf+".key.type", "uuid keys cannot be range-sharded (their order carries no meaning); use pg_hash or pg_list")
		}
		checkDefault(p, sf, s.Default, n)
		checkRanges(p, sf, s, n)
	case PgList:
		checkPgKey(p, sf, kind, s.Key)
		checkDefault(p, sf, s.Default, n)
		checkLists(p, sf, s, n)
	case Vindex:
		if kind != Vitess {
			p.add(sf, "vindex schemes route Vitess keyspaces; this record's router is %v", kind)
		}
		checkKeyCommon(p, sf, s.Key)
		switch s.Kind {
		case VindexHash:
			if s.Key.Type != Bigint && s.Key.Type != Integer {
				p.add(sf+".key.type", "is %v; the hash vindex takes integer keys (use xxhash for text or uuid)", s.Key.Type)
			}
		case VindexXXHash:
		default:
			p.add(sf+".vindex", "is %v; want hash or xxhash", s.Kind)
		}
		if len(s.Ranges) != n {
			p.add(sf+".ranges", "has %d ranges for %d shards; give one key range per shard, in shard order", len(s.Ranges), n)
			break
		}
		if err := keyrange.CheckPartition(s.Ranges); err != nil {
			var pe *keyrange.PartitionError
			if errors.As(err, &pe) && pe.Index >= 0 {
				p.add(fmt.Sprintf("%s.ranges[%d]", sf, pe.Index), "%s", pe.Reason)
			} else {
				p.add(sf+".ranges", "%v", err)
			}
		}
		for i, r := range s.Ranges {
			if i < n && l.Shards[i].Name != r.String() {
				p.add(fmt.Sprintf("%sshards[%d].name", prefix, i), "%q must be its key range %q (Vitess names shards by range)", l.Shards[i].Name, r.String())
			}
		}
	default:
		p.add(sf, "has unknown type %T", s)
	}
}

func checkKeyCommon(p *problems, sf string, k Key) {
	if !isToken(k.Column) {
		p.add(sf+".key.column", "%q must name the sharding key column", k.Column)
	}
	if !valid(keyTypeNames, k.Type) {
		p.add(sf+".key.type", "is %v; want bigint, integer, text or uuid", k.Type)
	}
	for i, t := range k.Tables {
		switch {
		case !isToken(t):
			p.add(fmt.Sprintf("%s.key.tables[%d]", sf, i), "%q must name a table", t)
		case slices.Contains(k.Tables[:i], t):
			p.add(fmt.Sprintf("%s.key.tables[%d]", sf, i), "%q is listed twice", t)
		}
	}
}

func checkPgKey(p *problems, sf string, kind RouterKind, k Key) {
	if kind != PgDog {
		p.add(sf, "pg_* schemes route PgDog databases; this record's router is %v", kind)
	}
	checkKeyCommon(p, sf, k)
}

func checkDefault(p *problems, sf string, d *uint32, n int) {
	if d != nil && int(*d) >= n {
		p.add(sf+".default", "is shard %d but the layout has %d shards (indexes 0..%d)", *d, n, n-1)
	}
}

// checkValue reports a bound or list value whose kind does not fit the key type.
func checkValue(p *problems, f string, t KeyType, v Value) {
	switch t {
	case Bigint:
		if v.IsText() {
			p.add(f, "%s is text but the key is bigint", v)
		}
	case Integer:
		if v.IsText() {
			p.add(f, "%s is text but the key is integer", v)
		} else if v.AsInt() < math.MinInt32 || v.AsInt() > math.MaxInt32 {
			p.add(f, "%s does not fit an integer (int4) key", v)
		}
	case Text:
		if !v.IsText() {
			p.add(f, "%s is a number but the key is text; quote it", v)
		} else if !utf8.ValidString(v.AsText()) {
			p.add(f, "%s is not valid UTF-8", v)
		}
	case UUID:
		if !v.IsText() || !isCanonicalUUID(v.AsText()) {
			p.add(f, "%s is not a lower-case canonical uuid (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", v)
		}
	}
}

func isCanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

func checkRanges(p *problems, sf string, s PgRange, n int) {
	if len(s.Ranges) == 0 {
		p.add(sf+".ranges", "is empty; give at least one range rule")
		return
	}
	last := len(s.Ranges) - 1
	for i, r := range s.Ranges {
		f := fmt.Sprintf("%s.ranges[%d]", sf, i)
		if int(r.Shard) >= n {
			p.add(f+".shard", "is %d but the layout has %d shards (indexes 0..%d)", r.Shard, n, n-1)
		}
		if r.Start != nil {
			checkValue(p, f+".start", s.Key.Type, *r.Start)
		}
		if r.End != nil {
			checkValue(p, f+".end", s.Key.Type, *r.End)
		}
		if r.Start != nil && r.End != nil && r.Start.Compare(*r.End) >= 0 {
			p.add(f, "start %s is not below end %s (ranges are [start, end))", r.Start, r.End)
		}
		if r.Start == nil && i > 0 {
			p.add(f+".start", "is unbounded but only ranges[0] may start at the minimum")
		}
		if r.End == nil && i < last {
			p.add(f+".end", "is unbounded but only the last range may run to the maximum")
		}
		if i == 0 {
			if r.Start != nil && s.Default == nil {
				p.add(f+".start", "is %s: keys below it are in no shard; leave ranges[0].start unbounded or set a default shard", r.Start)
			}
			continue
		}
		prev := s.Ranges[i-1]
		if prev.End == nil || r.Start == nil {
			continue // reported above
		}
		switch c := r.Start.Compare(*prev.End); {
		case r.Start.Compare(*prevStart(prev)) < 0:
			p.add(f, "is out of order: it starts at %s, before ranges[%d] (sort rules by start)", r.Start, i-1)
		case c < 0:
			p.add(f, "overlaps ranges[%d]: it starts at %s, before that range's end %s", i-1, r.Start, prev.End)
		case c > 0 && s.Default == nil:
			p.add(f, "leaves a gap after ranges[%d]: keys in [%s, %s) are in no shard (close it or set a default shard)", i-1, prev.End, r.Start)
		}
	}
	if e := s.Ranges[last].End; e != nil && s.Default == nil {
		p.add(fmt.Sprintf("%s.ranges[%d].end", sf, last), "is %s: keys from it up are in no shard; leave the last end unbounded or set a default shard", e)
	}
}

var minValue = Value{i: math.MinInt64}

func prevStart(r RangeRule) *Value {
	if r.Start == nil {
		return &minValue
	}
	return r.Start
}

func checkLists(p *problems, sf string, s PgList, n int) {
	if len(s.Lists) == 0 {
		p.add(sf+".lists", "is empty; give at least one list rule")
	}
	where := map[Value]string{}
	for i, l := range s.Lists {
		f := fmt.Sprintf("%s.lists[%d]", sf, i)
		if int(l.Shard) >= n {
			p.add(f+".shard", "is %d but the layout has %d shards (indexes 0..%d)", l.Shard, n, n-1)
		}
		if len(l.Values) == 0 {
			p.add(f+".values", "is empty; a list rule needs at least one value")
		}
		for j, v := range l.Values {
			vf := fmt.Sprintf("%s.values[%d]", f, j)
			checkValue(p, vf, s.Key.Type, v)
			if other, dup := where[v]; dup {
				p.add(vf, "%s is also in %s; a value belongs to one list", v, other)
				continue
			}
			where[v] = vf
		}
	}
}

func checkState(p *problems, r *Record) {
	s := r.State
	switch s.Phase {
	case Serving, Fenced:
		if r.Target != nil {
			p.add("target", "is set while the phase is %v; a target exists only while resharding or cutting over", s.Phase)
		}
		if s.To != 0 || s.Step != 0 {
			p.add("state", "phase %v carries no target generation or step (to=%d step=%v)", s.Phase, s.To, s.Step)
		}
	case Resharding, CuttingOver:
		if r.Target == nil {
			p.add("target", "is missing; phase %v needs the layout it moves to", s.Phase)
		} else {
			checkLayout(p, "target.", r.Router.Kind, r.Engine, *r.Target)
		}
		if s.To <= r.Generation {
			p.add("state.to", "is %d; the target's generation must be above the current generation %d", s.To, r.Generation)
		}
		if s.Phase == Resharding && s.Step != 0 {
			p.add("state.step", "is %v; only the cutting_over phase has a step", s.Step)
		}
		if s.Phase == CuttingOver && !valid(stepNames, s.Step) {
			p.add("state.step", "is %v; want one of %v", s.Step, stepNames[1:])
		}
	default:
		p.add("state.phase", "is %v; want serving, resharding, cutting_over or fenced", s.Phase)
	}
}
