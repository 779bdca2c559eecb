package merge

import (
	"strconv"
	"strings"
)

// Row is one result row; columns are addressed by index.
type Row []Value

// Nulls places NULLs in one ORDER BY key.
type Nulls uint8

const (
	// NullsDefault is Postgres's default: NULLS LAST for ASC and NULLS FIRST for DESC, that is,
	// NULL sorts as if larger than every value.
	NullsDefault Nulls = iota
	NullsFirst
	NullsLast
)

// Key is one ORDER BY key: a column, its direction and where its NULLs go.
type Key struct {
	Col   int
	Desc  bool
	Nulls Nulls
}

// NullsFirst reports where the key puts NULLs once the default is resolved.
func (k Key) NullsFirst() bool { return k.Nulls == NullsFirst || k.Nulls == NullsDefault && k.Desc }

// String writes the key as SQL with every default spelled out: "#2 DESC NULLS FIRST".
func (k Key) String() string {
	var b strings.Builder
	b.WriteString("#" + strconv.Itoa(k.Col))
	if k.Desc {
		b.WriteString(" DESC")
	} else {
		b.WriteString(" ASC")
	}
	if k.NullsFirst() {
		b.WriteString(" NULLS FIRST")
	} else {
		b.WriteString(" NULLS LAST")
	}
	return b.String()
}

// OrderBy is a multi-column ORDER BY. An empty OrderBy makes every row tie, so a merge keeps
// shard order: all of shard 0, then all of shard 1, and so on.
type OrderBy []Key

func (o OrderBy) String() string {
	parts := make([]string, len(o))
	for i, k := range o {
		parts[i] = k.String()
	}
	return "ORDER BY " + strings.Join(parts, ", ")
}

// Compare orders two rows as Postgres's ORDER BY does under COLLATE "C" (see Compare for
// values). Both rows must have every key's column. It does not allocate.
func (o OrderBy) Compare(a, b Row) int {
	for i := range o {
		k := &o[i]
		va, vb := &a[k.Col], &b[k.Col]
		if va.kind == KindNull || vb.kind == KindNull {
			if va.kind == vb.kind {
				continue
			}
			c := 1 // a is NULL and NULLs go last
			if k.NullsFirst() {
				c = -1
			}
			if vb.kind == KindNull {
				c = -c
			}
			return c
		}
		var c int
		switch {
		case va.kind == KindInt && vb.kind == KindInt:
			c = 0
			if va.i < vb.i {
				c = -1
			} else if va.i > vb.i {
				c = 1
			}
		case va.kind == KindText && vb.kind == KindText:
			c = strings.Compare(va.s, vb.s)
		default:
			c = Compare(*va, *vb)
		}
		if c != 0 {
			if k.Desc {
				return -c
			}
			return c
		}
	}
	return 0
}

// width returns the number of columns a row needs for o, after checking every key.
func (o OrderBy) width() (int, error) {
	w := 0
	for i, k := range o {
		if k.Col < 0 {
			return 0, fieldErrorf("order["+strconv.Itoa(i)+"].col", "column %d is negative (columns are numbered from 0)", k.Col)
		}
		if k.Nulls > NullsLast {
			return 0, fieldErrorf("order["+strconv.Itoa(i)+"].nulls", "%d is not NullsDefault, NullsFirst or NullsLast", k.Nulls)
		}
		w = max(w, k.Col+1)
	}
	return w, nil
}
