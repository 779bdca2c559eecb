package mysql

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/kernel/pghash"
)

// Flavor is which GTID form a server speaks.
type Flavor uint8

const (
	// MariaDB positions are a list of domain-server-seqno, one per replication domain
	// ("0-1-14,1-2-7"), as @@gtid_binlog_pos, @@gtid_slave_pos and @@gtid_current_pos hold
	// them. Within a domain, seqno orders transactions.
	MariaDB Flavor = iota + 1
	// MySQL positions (and WeSQL's) are GTID sets: source UUIDs with intervals of
	// transaction numbers, optionally tagged ("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,
	// 3e11fa47-…:job:1-3"), as @@gtid_executed holds them. A set orders by containment.
	MySQL
)

func (f Flavor) String() string {
	switch f {
	case MariaDB:
		return "MariaDB"
	case MySQL:
		return "MySQL"
	}
	return "unknown flavor"
}

// Position is a GTID position as Status reports it, in either flavor's form. The zero
// Position (the empty string) is the position of a server that has written nothing; it is
// below every other position of either flavor.
type Position struct {
	flavor  Flavor
	domains map[uint32]mariaGTID // MariaDB: domain -> last GTID
	sets    map[sidTag][]interval
}

type mariaGTID struct {
	server uint32
	seq    uint64
}

// sidTag is a MySQL GTID source: the server UUID (lower case) and an optional tag.
type sidTag struct {
	uuid, tag string
}

// interval is the transaction numbers [lo, hi], 1 <= lo <= hi.
type interval struct{ lo, hi uint64 }

// Flavor is the form of the position; 0 for the empty position.
func (p Position) Flavor() Flavor { return p.flavor }

// IsEmpty reports whether the position holds no transaction.
func (p Position) IsEmpty() bool { return p.flavor == 0 }

// ParsePosition reads a position in MariaDB's form (domain-server-seqno, comma-separated)
// or MySQL's GTID set form (uuid:intervals, with optional tags, comma-separated), ignoring
// the white space servers put after commas. It refuses a MariaDB domain named twice (a
// gtid_binlog_state, which lists one GTID per server, is not a position).
func ParsePosition(s string) (Position, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Position{}, nil
	}
	elems := strings.Split(s, ",")
	if strings.Contains(elems[0], ":") {
		return parseMySQL(s, elems)
	}
	return parseMariaDB(s, elems)
}

func parseMariaDB(s string, elems []string) (Position, error) {
	p := Position{flavor: MariaDB, domains: make(map[uint32]mariaGTID, len(elems))}
	for _, e := range elems {
		e = strings.TrimSpace(e)
		parts := strings.Split(e, "-")
		if len(parts) != 3 {
			return Position{}, fmt.Errorf("mysql: position %q: %q is not domain-server-seqno", s, e)
		}
		d, err1 := strconv.ParseUint(parts[0], 10, 32)
		srv, err2 := strconv.ParseUint(parts[1], 10, 32)
		seq, err3 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || !digits(parts[0]) || !digits(parts[1]) || !digits(parts[2]) {
			return Position{}, fmt.Errorf("mysql: position %q: %q is not domain-server-seqno in decimal", s, e)
		}
		if _, dup := p.domains[uint32(d)]; dup {
			return Position{}, fmt.Errorf("mysql: position %q names domain %d twice (a position has one GTID per domain)", s, d)
		}
		p.domains[uint32(d)] = mariaGTID{server: uint32(srv), seq: seq}
	}
	return p, nil
}

// digits reports whether s is plain decimal digits (ParseUint also takes "+1" and "1_0"
// with base 0; base 10 refuses those, but be explicit).
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func parseMySQL(s string, elems []string) (Position, error) {
	p := Position{flavor: MySQL, sets: map[sidTag][]interval{}}
	for _, e := range elems {
		e = strings.TrimSpace(e)
		parts := strings.Split(e, ":")
		uuid := strings.ToLower(parts[0])
		if !isUUID(uuid) {
			return Position{}, fmt.Errorf("mysql: position %q: %q does not start with a server UUID", s, e)
		}
		tag, n := "", 0
		for i, part := range parts[1:] {
			if part != "" && (part[0] < '0' || part[0] > '9') {
				if !isTag(part) {
					return Position{}, fmt.Errorf("mysql: position %q: %q is neither an interval nor a tag", s, part)
				}
				if i == len(parts)-2 {
					return Position{}, fmt.Errorf("mysql: position %q: tag %q has no interval", s, part)
				}
				tag = strings.ToLower(part)
				continue
			}
			iv, err := parseInterval(part)
			if err != nil {
				return Position{}, fmt.Errorf("mysql: position %q: %w", s, err)
			}
			k := sidTag{uuid, tag}
			p.sets[k] = append(p.sets[k], iv)
			n++
		}
		if n == 0 {
			return Position{}, fmt.Errorf("mysql: position %q: %q has no interval", s, e)
		}
	}
	for k, ivs := range p.sets {
		p.sets[k] = normalize(ivs)
	}
	return p, nil
}

func parseInterval(s string) (interval, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	a, err1 := strconv.ParseUint(lo, 10, 64)
	b, err2 := strconv.ParseUint(hi, 10, 64)
	if err1 != nil || err2 != nil || !digits(lo) || !digits(hi) || a == 0 || b < a {
		return interval{}, fmt.Errorf("%q is not an interval n or n-m with 1 <= n <= m", s)
	}
	return interval{a, b}, nil
}

// isUUID reports whether s is a UUID in canonical form: lower-case hexadecimal, dashed 8-4-4-4-12.
func isUUID(s string) bool {
	u, err := pghash.ParseUUID(s)
	return err == nil && pghash.FormatUUID(u) == s
}

// isTag reports whether s is a GTID tag: a letter or underscore, then up to 31 letters,
// digits or underscores (MySQL 8.3+).
func isTag(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}

// normalize sorts intervals and joins those that overlap or touch.
func normalize(ivs []interval) []interval {
	slices.SortFunc(ivs, func(a, b interval) int { return cmp.Compare(a.lo, b.lo) })
	out := ivs[:0]
	for _, iv := range ivs {
		if n := len(out); n > 0 && (iv.lo <= out[n-1].hi || iv.lo-1 == out[n-1].hi) {
			out[n-1].hi = max(out[n-1].hi, iv.hi)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// String writes the position in its flavor's form, canonically: MariaDB domains in order;
// MySQL sources by UUID, untagged intervals first, then tags in order, intervals joined.
func (p Position) String() string {
	var b strings.Builder
	switch p.flavor {
	case MariaDB:
		for i, d := range slices.Sorted(maps.Keys(p.domains)) {
			if i > 0 {
				b.WriteByte(',')
			}
			g := p.domains[d]
			fmt.Fprintf(&b, "%d-%d-%d", d, g.server, g.seq)
		}
	case MySQL:
		keys := slices.SortedFunc(maps.Keys(p.sets), func(a, b sidTag) int {
			return cmp.Or(strings.Compare(a.uuid, b.uuid), strings.Compare(a.tag, b.tag))
		})
		prev := ""
		for _, k := range keys {
			if k.uuid != prev {
				if prev != "" {
					b.WriteByte(',')
				}
				b.WriteString(k.uuid)
				prev = k.uuid
			}
			if k.tag != "" {
				b.WriteString(":" + k.tag)
			}
			for _, iv := range p.sets[k] {
				if iv.lo == iv.hi {
					fmt.Fprintf(&b, ":%d", iv.lo)
				} else {
					fmt.Fprintf(&b, ":%d-%d", iv.lo, iv.hi)
				}
			}
		}
	}
	return b.String()
}

// Compare orders two positions of one replication history: negative when p is behind q,
// zero when equal, positive when ahead. It fails when neither contains the other (a GTID
// set holding transactions the other lacks, each way: errant transactions), when a MariaDB
// domain has the same seqno from two different servers (two histories), and when the
// flavors differ.
func (p Position) Compare(q Position) (int, error) {
	if p.IsEmpty() || q.IsEmpty() {
		return cmp.Compare(boolInt(!p.IsEmpty()), boolInt(!q.IsEmpty())), nil
	}
	if p.flavor != q.flavor {
		return 0, fmt.Errorf("mysql: cannot compare a %s position (%s) with a %s one (%s)", p.flavor, p, q.flavor, q)
	}
	var pq, qp bool // p contains q, q contains p
	if p.flavor == MariaDB {
		for _, d := range slices.Sorted(maps.Keys(p.domains)) {
			if g, ok := q.domains[d]; ok && g.seq == p.domains[d].seq && g.server != p.domains[d].server {
				return 0, fmt.Errorf("mysql: positions %s and %s diverge: domain %d has seqno %d from server %d in one and server %d in the other", p, q, d, g.seq, p.domains[d].server, g.server)
			}
		}
		pq, qp = mariaContains(p, q), mariaContains(q, p)
	} else {
		pq, qp = setContains(p, q), setContains(q, p)
	}
	switch {
	case pq && qp:
		return 0, nil
	case pq:
		return 1, nil
	case qp:
		return -1, nil
	}
	return 0, fmt.Errorf("mysql: positions %s and %s are not ordered: each holds transactions the other lacks", p, q)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func mariaContains(p, q Position) bool {
	for d, g := range q.domains {
		if h, ok := p.domains[d]; !ok || h.seq < g.seq {
			return false
		}
	}
	return true
}

func setContains(p, q Position) bool {
	for k, need := range q.sets {
		have := p.sets[k]
		for _, iv := range need {
			// have is normalized: iv is inside one of its intervals or not contained.
			i, _ := slices.BinarySearchFunc(have, iv.lo, func(h interval, lo uint64) int { return cmp.Compare(h.hi, lo) })
			if i == len(have) || have[i].lo > iv.lo || have[i].hi < iv.hi {
				return false
			}
		}
	}
	return true
}

// Merge returns the least position containing both: per MariaDB domain the higher seqno,
// or the union of MySQL sets. It fails where Compare finds two histories or two flavors.
func (p Position) Merge(q Position) (Position, error) {
	if q.IsEmpty() {
		return p, nil
	}
	if p.IsEmpty() {
		return q, nil
	}
	if p.flavor != q.flavor {
		return Position{}, fmt.Errorf("mysql: cannot merge a %s position (%s) with a %s one (%s)", p.flavor, p, q.flavor, q)
	}
	out := Position{flavor: p.flavor}
	if p.flavor == MariaDB {
		out.domains = maps.Clone(p.domains)
		for d, g := range q.domains {
			h, ok := out.domains[d]
			if ok && h.seq == g.seq && h.server != g.server {
				return Position{}, fmt.Errorf("mysql: positions %s and %s diverge in domain %d", p, q, d)
			}
			if !ok || g.seq > h.seq {
				out.domains[d] = g
			}
		}
		return out, nil
	}
	out.sets = make(map[sidTag][]interval, len(p.sets))
	for k, ivs := range p.sets {
		out.sets[k] = slices.Clone(ivs)
	}
	for k, ivs := range q.sets {
		out.sets[k] = normalize(append(out.sets[k], ivs...))
	}
	return out, nil
}

// ComparePositions parses and compares two positions (see Position.Compare).
func ComparePositions(a, b string) (int, error) {
	p, err := ParsePosition(a)
	if err != nil {
		return 0, err
	}
	q, err := ParsePosition(b)
	if err != nil {
		return 0, err
	}
	return p.Compare(q)
}
