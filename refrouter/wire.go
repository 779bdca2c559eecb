package refrouter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"loam.dev/router/kernel/shardmap"
)

// Server puts a Router on the Postgres wire protocol, on one listener as PgDog does:
//
//   - a login to the admin database ([admin] name, default "admin", as [admin] user) gets
//     the PgDog admin commands the control plane sends (ParseAdmin lists them), answered in
//     the reply shapes of adapters/pgdog, so a controller drives this process with the
//     PgDog adapter unchanged;
//   - a login to the router's database as a users.toml user of it is a client session:
//     each simple-protocol Query names its sharding key in a leading comment
//     (ParseShardingKey) and runs on that key's shard through Router.Query, so it waits
//     while the database is paused and is refused (SQLSTATE 28000 or 57P01, relayed from
//     the shard) by a backend fence.
//
// Every login is checked with SCRAM-SHA-256 against the password the loaded files give
// (users.toml's [admin] and [[users]]); without one, nobody logs in. The server speaks no
// TLS, so Listen and Serve refuse an address that is not a loopback one.
type Server struct {
	opts   ServerOptions
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]bool // admin sessions, closed when the control plane is cut
	cut    bool
	rs     *Resharder
	closed bool
}

// ServerOptions configure a Server.
type ServerOptions struct {
	Router *Router
	// ReshardDSN, when set, is the superuser connection string of a shard's database that
	// the resharding stand-in (Resharder) runs as; without it COPY_DATA is refused.
	ReshardDSN func(shardmap.Backend) string
	// CommandTimeout bounds one admin command or client statement (default 2m).
	CommandTimeout time.Duration
	Logger         *slog.Logger
}

// ErrNotLoopback: the server speaks no TLS, so it serves loopback addresses only.
var ErrNotLoopback = errors.New("refrouter: the server speaks no TLS; listen on a loopback address (127.0.0.1, ::1)")

// Listen listens on addr (host:port, a loopback host) and serves.
func Listen(addr string, opts ServerOptions) (*Server, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("refrouter: listen %s: %w", addr, err)
	}
	s, err := Serve(ln, opts)
	if err != nil {
		ln.Close()
	}
	return s, err
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("refrouter: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: got %q", ErrNotLoopback, addr)
	}
	return nil
}

// Serve serves on ln, which must be bound to a loopback address, until Close.
func Serve(ln net.Listener, opts ServerOptions) (*Server, error) {
	if opts.Router == nil {
		return nil, errors.New("refrouter: ServerOptions.Router is nil")
	}
	if err := checkLoopback(ln.Addr().String()); err != nil {
		return nil, err
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// SetUnreachable cuts (or restores) the control plane: while cut, admin sessions are
// closed and admin logins are dropped before authentication, as when the controller's
// network to the router is down; client sessions go on (Router.SetUnreachable too).
func (s *Server) SetUnreachable(cut bool) {
	s.mu.Lock()
	s.cut = cut
	var drop []net.Conn
	if cut {
		for c := range s.conns {
			drop = append(drop, c)
		}
	}
	s.mu.Unlock()
	s.opts.Router.SetUnreachable(cut)
	for _, c := range drop {
		c.Close()
	}
}

// Close stops listening, ends every session and the resharding stand-in's streams.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	rs := s.rs
	s.mu.Unlock()
	err := s.ln.Close()
	s.cancel()
	s.wg.Wait()
	if rs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = errors.Join(err, rs.Close(ctx))
	}
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			stop := context.AfterFunc(s.ctx, func() { c.Close() })
			defer stop()
			s.session(c)
		}()
	}
}

// maxMessage bounds a client message (a statement of the load is a few hundred bytes).
const maxMessage = 1 << 20

// session runs one connection: startup, authentication, then admin commands or client
// statements.
func (s *Server) session(c net.Conn) {
	b := pgproto3.NewBackend(c, c)
	b.SetMaxBodyLen(maxMessage)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // the login, not the session
	var startup *pgproto3.StartupMessage
	for startup == nil {
		msg, err := b.ReceiveStartupMessage()
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			if _, err := c.Write([]byte("N")); err != nil {
				return
			}
		case *pgproto3.StartupMessage:
			startup = m
		default: // a CancelRequest: nothing here can be cancelled from outside
			return
		}
	}
	fatal := func(code, text string) {
		b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: code, Message: text})
		_ = b.Flush()
	}
	db, user := startup.Parameters["database"], startup.Parameters["user"]
	if db == "" {
		db = user
	}
	r := s.opts.Router
	r.mu.Lock()
	admin := r.topo.Admin
	var password string
	var known bool
	if db == admin.Name {
		password, known = admin.Password, user == admin.User && admin.Password != ""
	} else if d := r.topo.Databases[db]; d != nil && db == r.opts.Database {
		password, known = d.Users[user]
	}
	r.mu.Unlock()
	isAdmin := db == admin.Name
	if isAdmin {
		s.mu.Lock()
		cut := s.cut
		if !cut {
			s.conns[c] = true
			defer func() { s.mu.Lock(); delete(s.conns, c); s.mu.Unlock() }()
		}
		s.mu.Unlock()
		if cut {
			return // no answer at all: the control plane cannot reach this instance
		}
	}
	if !known {
		// The exchange runs all the same, against a password nobody has, so that a wrong
		// user cannot be told from a wrong password.
		password = "\x00no such login"
		known = false
	}
	if err := scramLogin(b, password); err != nil || !known {
		if err == nil || errors.Is(err, errAuth) {
			fatal("28P01", fmt.Sprintf("password authentication failed for user %q", user))
		} else {
			fatal("08P01", err.Error())
		}
		return
	}
	b.Send(&pgproto3.AuthenticationOk{})
	b.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "16.0 (" + Version + ")"})
	b.Send(&pgproto3.ParameterStatus{Name: "client_encoding", Value: "UTF8"})
	b.Send(&pgproto3.ParameterStatus{Name: "standard_conforming_strings", Value: "on"})
	b.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if b.Flush() != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	for {
		msg, err := b.Receive()
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			var ok bool
			if isAdmin {
				ok = s.adminQuery(b, m.String)
			} else {
				ok = s.clientQuery(b, m.String)
			}
			if !ok {
				return
			}
		case *pgproto3.Terminate:
			return
		case *pgproto3.Sync:
			b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if b.Flush() != nil {
				return
			}
		default:
			// The extended protocol: PgDog's admin database refuses it, and the client path
			// reads its key from the statement text, which the simple protocol carries.
			b.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "0A000", Message: "simple protocol supported only"})
			if b.Flush() != nil {
				return
			}
		}
	}
}
