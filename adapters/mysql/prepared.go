package mysql

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	"loam.dev/router/adapters"
)

// XID is the identifier of one XA transaction branch: format id, global transaction id
// (gtrid) and branch qualifier (bqual), each of the two up to 64 bytes.
type XID struct {
	FormatID int64
	Gtrid    []byte
	Bqual    []byte
}

// GID is how Prepared names the branch. A branch started as XA START 'gid' (format 1, no
// bqual), as PgDog-style coordinators and most applications do, is named by its gtrid
// verbatim. Any other is named by its SQL form, which XA COMMIT and XA ROLLBACK take as it
// is (a gtrid of its own that reads like that form cannot be told apart; use Recover for
// the parts).
func (x XID) GID() string {
	if x.FormatID == 1 && len(x.Bqual) == 0 {
		return string(x.Gtrid)
	}
	return x.SQL()
}

// SQL writes the xid as XA statements take it: X'gtrid',X'bqual',formatID, hexadecimal so
// any bytes are safe.
func (x XID) SQL() string {
	return "X'" + hex.EncodeToString(x.Gtrid) + "',X'" + hex.EncodeToString(x.Bqual) + "'," + strconv.FormatInt(x.FormatID, 10)
}

// ParseRecoverRow reads one row of XA RECOVER: data is gtrid and bqual run together, split by
// their lengths (the two length columns). It refuses lengths that do not add up or exceed
// 64, the most XA allows.
func ParseRecoverRow(formatID, gtridLen, bqualLen int64, data []byte) (XID, error) {
	if gtridLen < 0 || bqualLen < 0 || gtridLen > 64 || bqualLen > 64 || gtridLen+bqualLen != int64(len(data)) {
		return XID{}, fmt.Errorf("XA RECOVER row: gtrid_length %d and bqual_length %d do not split %d bytes of data", gtridLen, bqualLen, len(data))
	}
	return XID{FormatID: formatID, Gtrid: bytes.Clone(data[:gtridLen]), Bqual: bytes.Clone(data[gtridLen:])}, nil
}

// Recover lists the prepared XA branches of the server (XA RECOVER), ordered by gtrid, bqual
// and format. They are the server's, not one database's: XA RECOVER shows every branch to
// every user on MariaDB (MySQL shows other users' only with XA_RECOVER_ADMIN), and says
// nothing of who prepared a branch, in which database, or when.
func (b *Backend) Recover(ctx context.Context) ([]XID, error) {
	const op = "Prepared"
	rows, err := b.db.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return nil, b.fail(op, err)
	}
	defer rows.Close()
	out := []XID{}
	for rows.Next() {
		var f, gl, bl int64
		var data []byte
		if err := rows.Scan(&f, &gl, &bl, &data); err != nil {
			return nil, b.fail(op, err)
		}
		x, err := ParseRecoverRow(f, gl, bl, data)
		if err != nil {
			return nil, b.failf(op, "", "%v", err)
		}
		if b.mut&mutPreparedJoinsData != 0 {
			x = XID{FormatID: 1, Gtrid: data}
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, b.fail(op, err)
	}
	slices.SortFunc(out, func(a, c XID) int {
		return cmp.Or(bytes.Compare(a.Gtrid, c.Gtrid), bytes.Compare(a.Bqual, c.Bqual), cmp.Compare(a.FormatID, c.FormatID))
	})
	return out, nil
}

// Prepared lists the server's prepared XA branches (Recover) by GID. XA RECOVER has no owner,
// database or prepare time, so Owner and Database are empty and Prepared is zero: an
// in-doubt monitor on MySQL cannot age a branch from the server alone and must time it from
// when it first saw it. It only reads: nothing in this package commits or rolls one back.
func (b *Backend) Prepared(ctx context.Context) ([]adapters.PreparedXact, error) {
	xs, err := b.Recover(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]adapters.PreparedXact, len(xs))
	for i, x := range xs {
		out[i] = adapters.PreparedXact{GID: x.GID()}
	}
	return out, nil
}
