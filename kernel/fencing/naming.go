package fencing

import (
	"errors"
	"fmt"
	"strings"
)

// Session names one fenced session: the unit whose lease and generation are migrated.
type Session struct {
	Community string
	ID        string
}

func (s Session) String() string { return s.Community + "/" + s.ID }

// Placeholders a Naming template must contain, each exactly once.
const (
	CommunityPlaceholder = "<community>"
	SessionPlaceholder   = "<session>"
)

// Naming is the key layout of a directory: four templates in which <community> and <session>
// are replaced by a session's parts. It is a parameter because every service that adopts the
// migration has its own prefixes; Buzz is the seed's layout.
type Naming struct {
	OldLease, OldGeneration string // legacy keys: may live in different slots
	NewLease, NewGeneration string // hash-tagged pair: must share one slot
}

// Buzz is the seed's layout: buzz:<community>:tunnel:<session>:{lease,generation} renamed to
// buzz:tunnel:{<community>:<session>}:{lease,generation}.
var Buzz = Naming{
	OldLease:      "buzz:<community>:tunnel:<session>:lease",
	OldGeneration: "buzz:<community>:tunnel:<session>:generation",
	NewLease:      "buzz:tunnel:{<community>:<session>}:lease",
	NewGeneration: "buzz:tunnel:{<community>:<session>}:generation",
}

// ErrNaming is wrapped by every error about an invalid Naming.
var ErrNaming = errors.New("fencing: invalid key naming")

// Validate checks what the migration relies on: every template names both parts once; the
// four templates are distinct; the new pair has the same hash tag, which holds both parts, so
// that lease and generation share a slot for every session (axiom A1 of the seed); and the
// text before the tag is the same in both new templates, so a "}" inside a community or
// session id cannot make the tags differ.
func (n Naming) Validate() error {
	ts := map[string]string{"OldLease": n.OldLease, "OldGeneration": n.OldGeneration, "NewLease": n.NewLease, "NewGeneration": n.NewGeneration}
	seen := map[string]string{}
	for _, name := range []string{"OldLease", "OldGeneration", "NewLease", "NewGeneration"} {
		t := ts[name]
		for _, p := range []string{CommunityPlaceholder, SessionPlaceholder} {
			if c := strings.Count(t, p); c != 1 {
				return fmt.Errorf("%w: %s template %q contains %s %d times (it must contain it exactly once)", ErrNaming, name, t, p, c)
			}
		}
		if other, dup := seen[t]; dup {
			return fmt.Errorf("%w: %s and %s are both %q (the four keys must differ)", ErrNaming, other, name, t)
		}
		seen[t] = name
	}
	for _, name := range []string{"NewLease", "NewGeneration"} {
		t := ts[name]
		open := strings.IndexByte(t, '{')
		if open < 0 {
			return fmt.Errorf("%w: %s template %q has no hash tag (put <community> and <session> inside {...})", ErrNaming, name, t)
		}
		end := strings.IndexByte(t[open:], '}')
		if end < 0 {
			return fmt.Errorf("%w: %s template %q has no closing } for its hash tag", ErrNaming, name, t)
		}
		tag := t[open+1 : open+end]
		if !strings.Contains(tag, CommunityPlaceholder) || !strings.Contains(tag, SessionPlaceholder) {
			return fmt.Errorf("%w: %s hash tag {%s} must hold both <community> and <session>", ErrNaming, name, tag)
		}
		if strings.ContainsAny(strings.NewReplacer(CommunityPlaceholder, "", SessionPlaceholder, "").Replace(tag), "{}") {
			return fmt.Errorf("%w: %s hash tag {%s} must not contain braces besides its own", ErrNaming, name, tag)
		}
	}
	pl := n.NewLease[:strings.IndexByte(n.NewLease, '}')]
	pg := n.NewGeneration[:strings.IndexByte(n.NewGeneration, '}')]
	if pl != pg {
		return fmt.Errorf("%w: NewLease %q and NewGeneration %q differ before the end of the hash tag (they must share that prefix to share a slot)", ErrNaming, n.NewLease, n.NewGeneration)
	}
	return nil
}

// ErrSessionID is wrapped when a session's ids would split its new key pair across slots.
var ErrSessionID = errors.New("fencing: session ids break the hash tag of the new keys")

// CheckSession reports whether s's new lease and generation really share a hash tag. Validate
// guarantees it for every id but one shape: an id that closes the tag at once ("}" right after
// "{") leaves an empty tag, and then each whole key is hashed, to different slots. Such a
// session must be refused, not run: on a cluster its C script would be cross-slot.
func (n Naming) CheckSession(s Session) error {
	k := n.Keys(s)
	tl, tg := HashTag(k.NewLease), HashTag(k.NewGeneration)
	if tl == k.NewLease || tg == k.NewGeneration || tl != tg {
		return fmt.Errorf("%w: %s gives new keys %q and %q with no common hash tag (an id must not start the tag with \"}\")", ErrSessionID, s, k.NewLease, k.NewGeneration)
	}
	return nil
}

// Keys are the four keys of one session.
type Keys struct {
	OldLease, OldGeneration, NewLease, NewGeneration string
}

// Keys expands the templates for s.
func (n Naming) Keys(s Session) Keys {
	return Keys{
		OldLease: expand(n.OldLease, s), OldGeneration: expand(n.OldGeneration, s),
		NewLease: expand(n.NewLease, s), NewGeneration: expand(n.NewGeneration, s),
	}
}

// expand substitutes the placeholders in one pass, so an id that itself contains
// "<session>" or "<community>" is copied literally.
func expand(tpl string, s Session) string {
	var b strings.Builder
	b.Grow(len(tpl) + len(s.Community) + len(s.ID))
	for i := 0; i < len(tpl); {
		switch {
		case strings.HasPrefix(tpl[i:], CommunityPlaceholder):
			b.WriteString(s.Community)
			i += len(CommunityPlaceholder)
		case strings.HasPrefix(tpl[i:], SessionPlaceholder):
			b.WriteString(s.ID)
			i += len(SessionPlaceholder)
		default:
			j := strings.IndexByte(tpl[i+1:], '<')
			if j < 0 {
				j = len(tpl) - i - 1
			}
			b.WriteString(tpl[i : i+1+j])
			i += 1 + j
		}
	}
	return b.String()
}

// Lease returns the lease key of the given keyspace.
func (k Keys) Lease(sp Keyspace) string {
	if sp == New {
		return k.NewLease
	}
	return k.OldLease
}

// Pattern turns a template into a SCAN MATCH pattern matching every session's key: the
// placeholders become "*" and glob metacharacters of the literal text are escaped.
func Pattern(template string) string {
	var b strings.Builder
	for i := 0; i < len(template); {
		switch {
		case strings.HasPrefix(template[i:], CommunityPlaceholder):
			b.WriteByte('*')
			i += len(CommunityPlaceholder)
		case strings.HasPrefix(template[i:], SessionPlaceholder):
			b.WriteByte('*')
			i += len(SessionPlaceholder)
		default:
			if strings.IndexByte(`*?[]\`, template[i]) >= 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(template[i])
			i++
		}
	}
	return b.String()
}

// ErrAmbiguousKey is returned by Parse when a key matches a template in more than one way,
// e.g. a community id containing ":tunnel:". The key must then be handled by hand: guessing
// would fold one session's generation into another's counter.
var ErrAmbiguousKey = errors.New("fencing: key matches the template in more than one way")

// ErrNoMatch is returned by Parse when a key does not match the template.
var ErrNoMatch = errors.New("fencing: key does not match the template")

// Parse recovers the session from a key written with template (one of n's four). The backfill
// needs it: it finds old counters by SCAN and must name the new counter of the same session.
func Parse(template, key string) (Session, error) {
	ci := strings.Index(template, CommunityPlaceholder)
	si := strings.Index(template, SessionPlaceholder)
	if ci < 0 || si < 0 {
		return Session{}, fmt.Errorf("%w: template %q lacks a placeholder", ErrNaming, template)
	}
	first, second := CommunityPlaceholder, SessionPlaceholder
	fi, sj := ci, si
	if si < ci {
		first, second, fi, sj = SessionPlaceholder, CommunityPlaceholder, si, ci
	}
	pre, mid, post := template[:fi], template[fi+len(first):sj], template[sj+len(second):]
	if !strings.HasPrefix(key, pre) || !strings.HasSuffix(key, post) || len(key) < len(pre)+len(mid)+len(post) {
		return Session{}, fmt.Errorf("%w: %q against %q", ErrNoMatch, key, template)
	}
	body := key[len(pre) : len(key)-len(post)]
	var found []Session
	for i := 0; i+len(mid) <= len(body); i++ {
		if body[i:i+len(mid)] != mid {
			continue
		}
		a, b := body[:i], body[i+len(mid):]
		if first == SessionPlaceholder {
			a, b = b, a
		}
		found = append(found, Session{Community: a, ID: b})
	}
	switch len(found) {
	case 0:
		return Session{}, fmt.Errorf("%w: %q against %q", ErrNoMatch, key, template)
	case 1:
		return found[0], nil
	}
	return Session{}, fmt.Errorf("%w: %q against %q gives %d sessions (first %s, second %s)", ErrAmbiguousKey, key, template, len(found), found[0], found[1])
}
