package causalread

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"loam.dev/router/adapters/postgres"
	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine"
	"loam.dev/router/machine/causal"
)

// DefaultAcquireTimeout is the ordinary acquisition timeout: how long one request may wait for
// a connection, causal or not (the proxy's connect_timeout_server_max).
const DefaultAcquireTimeout = 10 * time.Second

// ErrSelectorClosed is returned by requests made after, or waiting during, Close.
var ErrSelectorClosed = errors.New("causalread: causal selector closed")

// ErrUnknownEndpoint: a hostgroup names an endpoint that has no pool (AddEndpoint it first).
var ErrUnknownEndpoint = errors.New("causalread: endpoint has no pool")

// CausalConfig configures a CausalSelector.
type CausalConfig struct {
	// AcquireTimeout bounds every acquisition, ordinary or causal, including the time a causal
	// request waits for an endpoint to reach its requirement; default DefaultAcquireTimeout.
	// A context deadline that is earlier wins. There is no other wait setting.
	AcquireTimeout time.Duration
	// Poll configures the LSN monitor.
	Poll postgres.LSNPollConfig
	// Trace receives the CausalRead spec events; nil discards them.
	Trace machine.TraceSink
	// Clock overrides the monotonic clock (tests).
	Clock postgres.Clock
	// OnPollError, if set, receives the reason of every failed LSN poll.
	OnPollError func(lsn.Endpoint, error)
}

// CausalSelector hands out connections from per-endpoint pgx pools so that a frontend's read
// sees its own earlier writes: the causal-read machine (loam.dev/router/machine/causal) driven
// with a real clock, timers, an LSN poller per endpoint and the application's pools.
//
// The application keeps its pools; the selector never runs a statement on them. Progress
// comes only from the monitor's own connections.
type CausalSelector struct {
	core *selector[*pgxpool.Conn]
}

// NewCausalSelector returns a selector with no endpoints.
func NewCausalSelector(cfg CausalConfig) *CausalSelector {
	s := &CausalSelector{}
	s.core = newSelector(cfg, func(ctx context.Context, ep lsn.Endpoint, pool any) (*pgxpool.Conn, error) {
		p, _ := pool.(*pgxpool.Pool)
		if p == nil {
			return nil, fmt.Errorf("%w: %s is monitored only (added with a nil pool)", ErrUnknownEndpoint, ep)
		}
		return p.Acquire(ctx)
	})
	return s
}

// AddEndpoint registers the application's pool for ep and, when monitor is not nil, starts
// polling ep's progress on a separate connection configured by monitor (the pool's own
// ConnConfig is a fine choice: the poller copies it and opens its own connection). Without a
// monitor, feed samples with Observe. A nil pool monitors ep without serving requests from
// it (a daemon that only shows the view): a route to it fails with ErrUnknownEndpoint.
func (s *CausalSelector) AddEndpoint(ep lsn.Endpoint, pool *pgxpool.Pool, monitor *pgx.ConnConfig) error {
	return s.core.addEndpoint(ep, pool, monitor)
}

// SetHostgroup replaces the members of hostgroup hg. Each member must have been added.
func (s *CausalSelector) SetHostgroup(hg int, members ...lsn.Endpoint) error {
	return s.core.setHostgroup(hg, members)
}

// Observe records a sample from a monitor of the caller's own.
func (s *CausalSelector) Observe(ep lsn.Endpoint, sample lsn.Sample) { s.core.observe(ep, sample) }

// Stats is the stats_pgsql_lsn view: one row per physical endpoint, host, port and its latest
// position, or none (NULL) when its progress is unknown or withdrawn.
func (s *CausalSelector) Stats() []lsn.Row { return s.core.stats() }

// MonitorRow is a row of the stats view with what the monitor retains for the endpoint.
type MonitorRow struct {
	lsn.Row
	// Samples is how many successful samples the endpoint's history retains (progress and
	// age pruning bound it: see kernel/lsn).
	Samples int
	// Bytes is what that history holds in memory.
	Bytes int
	// Age is how long ago the latest sample, successful or not, was sent: about the poll
	// interval while the monitor runs.
	Age time.Duration
}

// MonitorStats is Stats with each endpoint's retention and the age of its latest sample,
// for metrics.
func (s *CausalSelector) MonitorStats() []MonitorRow { return s.core.monitorStats() }

// Frontend returns the handle of one application session (a user session, a request
// context, a worker: whatever must read its own writes). Handles with the same id share
// their execution records.
func (s *CausalSelector) Frontend(id string) *Frontend { return &Frontend{s: s, id: id} }

// Close stops the pollers and timers and fails waiting requests with ErrSelectorClosed. The
// application's pools stay open.
func (s *CausalSelector) Close() { s.core.close() }

// Frontend is one application session's view of the selector.
type Frontend struct {
	s  *CausalSelector
	id string
}

// Acquire returns a connection from any member of hostgroup hg (an ordinary request: no LSN
// state is read or changed).
func (f *Frontend) Acquire(ctx context.Context, hg int) (*CausalConn, error) {
	return f.acquire(ctx, hg, 0, false)
}

// AcquireCausal returns a connection from a member of hostgroup hg that has reached this
// frontend's last execution on hostgroup from, waiting for one within the acquisition
// timeout. It fails with an error wrapping causal.ErrNotReached (a *causal.WaitError) when
// none gets there in time; it never falls back to another hostgroup.
func (f *Frontend) AcquireCausal(ctx context.Context, hg, from int) (*CausalConn, error) {
	return f.acquire(ctx, hg, from, true)
}

func (f *Frontend) acquire(ctx context.Context, hg, from int, isCausal bool) (*CausalConn, error) {
	conn, ep, err := f.s.core.acquire(ctx, f.id, hg, from, isCausal)
	if err != nil {
		return nil, err
	}
	return &CausalConn{Conn: conn, Endpoint: ep, f: f, hg: hg}, nil
}

// Close forgets the frontend's execution records and fails its waiting requests.
func (f *Frontend) Close() { f.s.core.disconnect(f.id) }

// CausalConn is a pooled connection handed out by a Frontend. Use it like a *pgxpool.Conn and
// give it back with Release once its statements have completed.
type CausalConn struct {
	*pgxpool.Conn
	// Endpoint is the server the connection is to.
	Endpoint lsn.Endpoint
	f        *Frontend
	hg       int
}

// Release records the execution (the frontend's record for the connection's hostgroup
// becomes this endpoint, now) and returns the connection to its pool. Call it after the last
// statement's result was read: the completion time is when Release is called.
func (c *CausalConn) Release() {
	c.f.s.core.executed(c.f.id, c.hg, c.Endpoint)
	c.Conn.Release()
}

// ReleaseUnused returns the connection without recording an execution (nothing was run).
func (c *CausalConn) ReleaseUnused() { c.Conn.Release() }

// selector is the driver of the causal machine, generic over the connection type so that it
// can be tested without a server.
type selector[C any] struct {
	cfg     CausalConfig
	clock   postgres.Clock
	connect func(context.Context, lsn.Endpoint, any) (C, error) // one acquisition from one pool

	mu      sync.Mutex
	m       *causal.Machine
	rng     *rand.Rand
	pools   map[lsn.Endpoint]any
	waits   map[uint64]chan causal.Command
	timers  map[string]*time.Timer
	nextID  uint64
	closed  bool
	stop    context.CancelFunc
	pollers sync.WaitGroup
	pollCtx context.Context
}

func newSelector[C any](cfg CausalConfig, acquire func(context.Context, lsn.Endpoint, any) (C, error)) *selector[C] {
	if cfg.AcquireTimeout <= 0 {
		cfg.AcquireTimeout = DefaultAcquireTimeout
	}
	cfg.Poll = cfg.Poll.WithDefaults()
	if cfg.Clock == nil {
		cfg.Clock = postgres.NewClock()
	}
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	ctx, stop := context.WithCancel(context.Background())
	return &selector[C]{
		cfg: cfg, clock: cfg.Clock, connect: acquire,
		m:     causal.New(causal.Config{Window: cfg.Poll.History.Milliseconds()}),
		rng:   rand.New(rand.NewChaCha8(seed)),
		pools: map[lsn.Endpoint]any{}, waits: map[uint64]chan causal.Command{}, timers: map[string]*time.Timer{},
		stop: stop, pollCtx: ctx,
	}
}

// on feeds one input with the lock held and executes the commands that concern the driver.
func (s *selector[C]) on(in causal.Input) {
	ctx := &machine.Ctx{Now: s.clock(), Rand: s.rng, Trace: s.cfg.Trace}
	for _, c := range s.m.On(ctx, in) {
		switch c := c.(type) {
		case causal.Route:
			s.deliver(c.ID, c)
		case causal.Fail:
			s.deliver(c.ID, c)
		case causal.SetTimer:
			s.arm(c.ID, c.At)
		case causal.CancelTimer:
			if t := s.timers[c.ID]; t != nil {
				t.Stop()
				delete(s.timers, c.ID)
			}
		}
	}
}

func (s *selector[C]) deliver(id uint64, c causal.Command) {
	if ch := s.waits[id]; ch != nil {
		ch <- c // buffered: one answer per request
		delete(s.waits, id)
	}
}

func (s *selector[C]) arm(id string, at int64) {
	if t := s.timers[id]; t != nil {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(time.Duration(at-s.clock())*time.Millisecond, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.timers[id] != t || s.closed {
			return
		}
		// The machine's clock is in whole milliseconds: fire only once it shows the deadline.
		for s.clock() < at {
			time.Sleep(100 * time.Microsecond)
		}
		delete(s.timers, id)
		s.on(causal.TimerFired{ID: id})
	})
	s.timers[id] = t
}

func (s *selector[C]) addEndpoint(ep lsn.Endpoint, pool any, monitor *pgx.ConnConfig) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSelectorClosed
	}
	if _, dup := s.pools[ep]; dup {
		return fmt.Errorf("postgres: endpoint %s added twice (one pool per physical endpoint; hostgroups only list it)", ep)
	}
	s.pools[ep] = pool
	if monitor != nil {
		p := &postgres.LSNPoller{Endpoint: ep, Conn: monitor, Config: s.cfg.Poll, Clock: s.clock, Sink: s.observe, OnError: s.cfg.OnPollError}
		s.pollers.Add(1)
		go func() {
			defer s.pollers.Done()
			_ = p.Run(s.pollCtx)
		}()
	}
	return nil
}

func (s *selector[C]) setHostgroup(hg int, members []lsn.Endpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ep := range members {
		if _, ok := s.pools[ep]; !ok {
			return fmt.Errorf("%w: hostgroup %d lists %s", ErrUnknownEndpoint, hg, ep)
		}
	}
	s.on(causal.SetHostgroup{Hostgroup: hg, Endpoints: members})
	return nil
}

func (s *selector[C]) observe(ep lsn.Endpoint, sample lsn.Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.on(causal.Sampled{Endpoint: ep, Sample: sample})
	}
}

func (s *selector[C]) executed(frontend string, hg int, ep lsn.Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.on(causal.Executed{Frontend: frontend, Hostgroup: hg, Endpoint: ep})
	}
}

func (s *selector[C]) disconnect(frontend string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.on(causal.Disconnected{Frontend: frontend})
	}
}

func (s *selector[C]) stats() []lsn.Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Rows()
}

func (s *selector[C]) monitorStats() []MonitorRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	rows := s.m.Rows()
	out := make([]MonitorRow, len(rows))
	for i, r := range rows {
		h := s.m.History(r.Endpoint)
		latest, _ := h.Latest()
		out[i] = MonitorRow{Row: r, Samples: h.Len(), Bytes: h.Footprint(), Age: time.Duration(now-latest.Sent) * time.Millisecond}
	}
	return out
}

// acquire asks the machine where request may go (waiting if it must), then acquires from the
// routed endpoints in order within the same deadline.
func (s *selector[C]) acquire(ctx context.Context, frontend string, hg, from int, isCausal bool) (C, lsn.Endpoint, error) {
	var zero C
	now := s.clock()
	deadline := now + s.cfg.AcquireTimeout.Milliseconds()
	if d, ok := ctx.Deadline(); ok {
		deadline = min(deadline, now+time.Until(d).Milliseconds())
	}
	ch := make(chan causal.Command, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return zero, lsn.Endpoint{}, ErrSelectorClosed
	}
	s.nextID++
	id := s.nextID
	s.waits[id] = ch
	if isCausal {
		s.on(causal.AcquireCausal{ID: id, Frontend: frontend, Hostgroup: hg, From: from, Deadline: deadline})
	} else {
		s.on(causal.Acquire{ID: id, Frontend: frontend, Hostgroup: hg})
	}
	s.mu.Unlock()

	var answer causal.Command
	select {
	case answer = <-ch:
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.waits, id)
		s.on(causal.Cancel{ID: id})
		s.mu.Unlock()
		return zero, lsn.Endpoint{}, fmt.Errorf("postgres: acquiring for frontend %q in hostgroup %d: %w", frontend, hg, ctx.Err())
	}
	switch a := answer.(type) {
	case causal.Fail:
		return zero, lsn.Endpoint{}, a.Err
	case causal.Route:
		actx, cancel := context.WithTimeout(ctx, time.Duration(max(deadline-s.clock(), 1))*time.Millisecond)
		defer cancel()
		var errs []error
		for _, ep := range a.Endpoints {
			s.mu.Lock()
			pool := s.pools[ep]
			s.mu.Unlock()
			c, err := s.connect(actx, ep, pool)
			if err == nil {
				return c, ep, nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			if actx.Err() != nil {
				break
			}
		}
		return zero, lsn.Endpoint{}, fmt.Errorf("postgres: no connection from hostgroup %d's routed endpoints: %w", hg, errors.Join(errs...))
	}
	return zero, lsn.Endpoint{}, fmt.Errorf("postgres: unexpected answer %T", answer)
}

func (s *selector[C]) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.stop()
	for id, t := range s.timers {
		t.Stop()
		delete(s.timers, id)
	}
	for id, ch := range s.waits {
		ch <- causal.Fail{ID: id, Err: ErrSelectorClosed}
		delete(s.waits, id)
	}
	s.mu.Unlock()
	s.pollers.Wait()
}
