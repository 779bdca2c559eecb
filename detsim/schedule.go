package detsim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Schedule pins down the parts of a run that shrinking removes: which fault firings happen
// and which workload operations are issued. With the seed (which fixes everything else) it
// replays a run exactly, and its text form is what a failure report prints and the -schedule
// flag reads back.
//
// A nil list means "as the seed decides". Faults lists (point, evaluation) pairs: the N-th
// evaluation of the point fires, and no other evaluation does. Ops lists indices into the
// workload the seed generated, in increasing order.
type Schedule struct {
	Ops    []int
	Faults []Firing

	set map[faultKey]bool
}

type faultKey struct {
	point string
	n     int
}

// ErrBadSchedule is wrapped by ParseSchedule's errors.
var ErrBadSchedule = errors.New("detsim: bad schedule")

func (sc *Schedule) hasFault(point string, n int) bool {
	if sc.set == nil {
		sc.set = make(map[faultKey]bool, len(sc.Faults))
		for _, f := range sc.Faults {
			sc.set[faultKey{f.Point, f.N}] = true
		}
	}
	return sc.set[faultKey{point, n}]
}

// KeepOp reports whether workload operation i is issued in this run.
func (s *Sim) KeepOp(i int) bool {
	if s.keep == nil || s.keep.Ops == nil {
		return true
	}
	_, ok := slices.BinarySearch(s.keep.Ops, i)
	return ok
}

// String is the schedule's text form: "ops=0,3,7;faults=net.drop#12,pgdog.crash#2", with
// "*" for a list the seed decides and nothing after "=" for an empty list.
func (sc *Schedule) String() string {
	var b strings.Builder
	b.WriteString("ops=")
	if sc.Ops == nil {
		b.WriteByte('*')
	}
	for i, o := range sc.Ops {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(o))
	}
	b.WriteString(";faults=")
	if sc.Faults == nil {
		b.WriteByte('*')
	}
	for i, f := range sc.Faults {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// ParseSchedule reads the text form back. The empty string is the seed's own schedule.
func ParseSchedule(text string) (*Schedule, error) {
	sc := &Schedule{}
	if strings.TrimSpace(text) == "" {
		return sc, nil
	}
	bad := func(format string, a ...any) (*Schedule, error) {
		return nil, fmt.Errorf("%w: %q: %s (the form is ops=0,3,7;faults=net.drop#12,pgdog.crash#2, with * for the seed's own)", ErrBadSchedule, text, fmt.Sprintf(format, a...))
	}
	seen := map[string]bool{}
	for part := range strings.SplitSeq(strings.TrimSpace(text), ";") {
		key, val, ok := strings.Cut(part, "=")
		if !ok || (key != "ops" && key != "faults") {
			return bad("part %q is not ops=... or faults=...", part)
		}
		if seen[key] {
			return bad("%s appears twice", key)
		}
		seen[key] = true
		if val == "*" {
			continue
		}
		switch key {
		case "ops":
			sc.Ops = []int{}
			if val == "" {
				continue
			}
			for item := range strings.SplitSeq(val, ",") {
				i, err := strconv.Atoi(item)
				if err != nil || i < 0 {
					return bad("op %q is not a non-negative integer", item)
				}
				if len(sc.Ops) > 0 && i <= sc.Ops[len(sc.Ops)-1] {
					return bad("ops must increase (%d after %d)", i, sc.Ops[len(sc.Ops)-1])
				}
				sc.Ops = append(sc.Ops, i)
			}
		case "faults":
			sc.Faults = []Firing{}
			if val == "" {
				continue
			}
			for item := range strings.SplitSeq(val, ",") {
				name, num, ok := strings.Cut(item, "#")
				n, err := strconv.Atoi(num)
				if !ok || err != nil || n < 1 {
					return bad("fault %q is not point#N with N >= 1", item)
				}
				if _, known := LookupPoint(name); !known {
					return bad("fault point %q is not in the catalogue", name)
				}
				sc.Faults = append(sc.Faults, Firing{Point: name, N: n})
			}
		}
	}
	return sc, nil
}
