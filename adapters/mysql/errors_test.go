package mysql_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	mysqlad "loam.dev/router/adapters/mysql"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		code   string
		fenced bool
	}{
		{"MariaDB locked account", &mysql.MySQLError{Number: 4151, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "Access denied, this account is locked"}, "4151", true},
		{"MySQL locked account", &mysql.MySQLError{Number: 3118, Message: "Access denied for user 'app'@'%'. Account is locked."}, "3118", true},
		{"wrapped", fmt.Errorf("connect: %w", &mysql.MySQLError{Number: 4151}), "4151", true},
		{"wrong password", &mysql.MySQLError{Number: 1045, Message: "Access denied for user"}, "1045", false},
		{"read only", &mysql.MySQLError{Number: 1290, Message: "--read-only"}, "1290", false},
		{"killed connection", mysql.ErrInvalidConn, "", false},
		{"bad connection", driver.ErrBadConn, "", false},
		{"plain", errors.New("connection reset by peer"), "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.fenced, mysqlad.IsFenceError(c.err))
			require.Equal(t, c.code, mysqlad.Code(c.err))
			err := mysqlad.Classify("db1:3306", "Insert", c.err)
			require.Equal(t, c.fenced, errors.Is(err, adapters.ErrFenced))
			var be *adapters.BackendError
			require.ErrorAs(t, err, &be)
			require.Equal(t, "db1:3306", be.Backend)
			require.Equal(t, "Insert", be.Op)
			require.Equal(t, c.code, be.Code)
			require.ErrorIs(t, err, c.err, "the original error stays in the chain")
			require.Same(t, err, mysqlad.Classify("other:1", "Again", err), "classifying twice keeps the first")
		})
	}
	require.NoError(t, mysqlad.Classify("x", "y", nil))
	err := mysqlad.Classify("db1:3306", "Status", fmt.Errorf("query: %w", context.Canceled))
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, adapters.ErrFenced)
	require.True(t, mysqlad.IsConnLost(&mysql.MySQLError{Number: 1927, Message: "Connection was killed"}))

	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	err = mysqlad.Classify("db1:3306", "Open", dial)
	require.ErrorIs(t, err, adapters.ErrUnreachable, "nothing was sent")
	require.ErrorIs(t, err, dial)
	require.NotErrorIs(t, mysqlad.Classify("db1:3306", "Insert", &net.OpError{Op: "read", Err: errors.New("reset")}), adapters.ErrUnreachable,
		"a connection that broke under a statement may have run it")
	require.NotErrorIs(t, mysqlad.Classify("db1:3306", "Insert", mysql.ErrInvalidConn), adapters.ErrUnreachable)
}

// connectorFunc is a driver.Connector whose Connect is a function.
type connectorFunc func(context.Context) (driver.Conn, error)

func (f connectorFunc) Connect(ctx context.Context) (driver.Conn, error) { return f(ctx) }
func (f connectorFunc) Driver() driver.Driver                            { return nil }

type nopConn struct{ driver.Conn }

func (nopConn) Close() error { return nil }

func TestClassifySession(t *testing.T) {
	ctx := context.Background()
	locked := connectorFunc(func(context.Context) (driver.Conn, error) {
		return nil, &mysql.MySQLError{Number: 4151, Message: "Access denied, this account is locked"}
	})
	open := connectorFunc(func(context.Context) (driver.Conn, error) { return nopConn{}, nil })
	down := connectorFunc(func(context.Context) (driver.Conn, error) { return nil, errors.New("connection refused") })
	calls := 0
	counting := connectorFunc(func(context.Context) (driver.Conn, error) { calls++; return nopConn{}, nil })

	err := mysqlad.ClassifySession(ctx, "db1:3306", "Insert", mysql.ErrInvalidConn, locked)
	require.ErrorIs(t, err, adapters.ErrFenced, "a lost session whose account is now locked: the fence")
	require.ErrorIs(t, err, mysql.ErrInvalidConn)
	var be *adapters.BackendError
	require.ErrorAs(t, err, &be)
	require.Empty(t, be.Code, "no number arrived; none is made up")

	err = mysqlad.ClassifySession(ctx, "db1:3306", "Insert", driver.ErrBadConn, open)
	require.NotErrorIs(t, err, adapters.ErrFenced, "the account still logs in: something else ended the session")
	err = mysqlad.ClassifySession(ctx, "db1:3306", "Insert", mysql.ErrInvalidConn, down)
	require.NotErrorIs(t, err, adapters.ErrFenced)
	require.ErrorContains(t, err, "connection refused")

	err = mysqlad.ClassifySession(ctx, "db1:3306", "Insert", &mysql.MySQLError{Number: 1062}, counting)
	require.Equal(t, "1062", mysqlad.Code(err))
	require.Zero(t, calls, "a server error needs no second login")
	err = mysqlad.ClassifySession(ctx, "db1:3306", "Login", &mysql.MySQLError{Number: 4151}, counting)
	require.ErrorIs(t, err, adapters.ErrFenced)
	require.Zero(t, calls)
	require.NotErrorIs(t, mysqlad.ClassifySession(ctx, "x", "y", mysql.ErrInvalidConn, nil), adapters.ErrFenced)
	require.NoError(t, mysqlad.ClassifySession(ctx, "x", "y", nil, locked))
}
