package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// DefaultLeaseKey is the blob that names the active controller.
const DefaultLeaseKey = "lease/controller"

// DefaultLeaseTTL is how long a lease lasts without renewal.
const DefaultLeaseTTL = 10 * time.Second

// DefaultLeaseMaxTTL is the longest TTL a lease blob is believed to carry.
const DefaultLeaseMaxTTL = 60 * time.Second

// CheckLeaseBlob refuses lease data that does not decode or whose TTL is not in (0, max]:
// a store server checks every lease a client writes with it.
func CheckLeaseBlob(data []byte, max time.Duration) error {
	var d leaseData
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("driver: not a lease: %w", err)
	}
	if d.Holder == "" {
		return errors.New("driver: a lease needs a holder")
	}
	if ttl := time.Duration(d.TTLMS) * time.Millisecond; d.TTLMS <= 0 || ttl > max {
		return fmt.Errorf("driver: the lease's TTL %v is outside (0, %v], the configured maximum (controller.lease_max_ttl)", ttl, max)
	}
	return nil
}

// ErrNotLeader is returned by a guarded store (Lease.Guard) for a write made while the
// lease is not held, and by Hold when the lease was lost: a deposed controller's step is
// refused instead of executed.
var ErrNotLeader = errors.New("driver: this controller does not hold the lease")

// Token names one tenure of the lease: who holds it and its epoch, the blob version of the
// write that took it. Epochs come from the store's version counter, so a later tenure has a
// greater epoch, and every audit entry and log line of a step carries the token it ran under.
type Token struct {
	Holder string `json:"holder"`
	Epoch  uint64 `json:"epoch"`
}

func (t Token) String() string { return fmt.Sprintf("%s@%d", t.Holder, t.Epoch) }

// leaseData is the lease blob's content.
type leaseData struct {
	Holder string `json:"holder"`
	// Epoch is 0 in the write that takes the lease (its own version is the epoch) and the
	// epoch in every renewal.
	Epoch uint64 `json:"epoch,omitempty"`
	TTLMS int64  `json:"ttl_ms"`
	// RenewedMS is the holder's wall clock at the write, for people; nobody's decision
	// depends on it (clocks of different machines are not compared).
	RenewedMS int64 `json:"renewed_ms"`
	Released  bool  `json:"released,omitempty"`
}

// maxLeaseTTLMS is the largest ttl_ms a lease blob may carry: its TTL in nanoseconds must
// fit a time.Duration (a larger one would wrap negative and read as expired at once).
const maxLeaseTTLMS = math.MaxInt64 / int64(time.Millisecond)

// decodeLease reads a lease blob, which anyone who can write the store could have written:
// a blob that is not JSON, or whose ttl_ms is negative or too large for a Duration, is an
// error (and the zero leaseData).
func decodeLease(data []byte) (leaseData, error) {
	var d leaseData
	if err := json.Unmarshal(data, &d); err != nil {
		return leaseData{}, fmt.Errorf("driver: the lease blob: %w: %v", adapters.ErrCorrupt, err)
	}
	if d.TTLMS < 0 || d.TTLMS > maxLeaseTTLMS {
		return leaseData{}, fmt.Errorf("driver: the lease blob: %w: ttl_ms %d is not a TTL in milliseconds (0 to %d)", adapters.ErrCorrupt, d.TTLMS, maxLeaseTTLMS)
	}
	return d, nil
}

// LeaseOptions configure a Lease.
type LeaseOptions struct {
	Key    string        // default DefaultLeaseKey
	Holder string        // this controller's name; required
	TTL    time.Duration // default DefaultLeaseTTL
	// MaxTTL caps the TTL this controller believes another holder's lease blob (default
	// DefaultLeaseMaxTTL, at least TTL): a blob written with a ten-year TTL holds the
	// standbys off for MaxTTL at most.
	MaxTTL time.Duration
	Logger *slog.Logger
	// OnChange, when set, is told every time this controller takes or loses the lease.
	OnChange func(t Token, held bool)

	skipExpiry bool // mutant: a standby takes the lease without waiting for it to expire
}

// Lease keeps one active controller among those sharing a store: the holder renews a blob
// by compare-and-set; standbys watch its version and take it by compare-and-set once it has
// not changed for one TTL, as measured on their own clock. No clocks are compared across
// machines, only durations: a holder counts its tenure from the moment it sent its last
// successful write, a standby from the moment it first saw that write, which is later, so
// the holder stops (Valid turns false, a tenth of a TTL early for clock-rate error) before
// any standby can take over. A holder that cannot renew (the store is down) stops when its
// tenure ends; one whose renewal conflicts has been replaced and stops at once.
//
// A store that keeps leases itself (adapters.LeaseStore: etcd) holds the lease instead:
// Acquire campaigns on it, the store's client renews it and the store's clock expires it,
// Hold returns when the store ends the tenure, and a GuardedStore writes through the
// tenure's fenced view, so a deposed holder's write is refused by the store in the same
// transaction, not only by this process's own reckoning of its tenure. Callers see one
// interface either way.
//
// The lease is the first guard, and the store's compare-and-set the second: a controller
// resumes a machine by saving its snapshot over the version it read, so a deposed holder
// that wakes from a pause cannot save (its expected version is gone) and executes at most
// the commands of its last saved step, which the new holder re-issues under the same step
// ids anyway (see Run).
type Lease struct {
	store adapters.BlobStore
	opts  LeaseOptions
	log   *slog.Logger

	native adapters.LeaseStore // nil: the blob lease

	mu         sync.Mutex
	token      Token
	version    uint64          // of the lease blob, as this holder last wrote it
	validUntil time.Time       // monotonic; zero when not held
	tenure     adapters.Tenure // the store-kept tenure (native only); nil when not held
	lost       chan struct{}
	why        string // why the lease is not held now, for status; "" when held or unknown
}

// NewLease returns a lease on store for opts.Holder; it holds nothing until Acquire.
func NewLease(store adapters.BlobStore, opts LeaseOptions) (*Lease, error) {
	if opts.Holder == "" {
		return nil, errors.New("driver: a lease needs a holder name (controller.id)")
	}
	if opts.Key == "" {
		opts.Key = DefaultLeaseKey
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultLeaseTTL
	}
	if opts.TTL < 10*time.Millisecond {
		return nil, fmt.Errorf("driver: lease TTL %v is below 10ms; renewals could not keep up", opts.TTL)
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = max(DefaultLeaseMaxTTL, opts.TTL)
	}
	if opts.MaxTTL < opts.TTL {
		return nil, fmt.Errorf("driver: lease MaxTTL %v is below the TTL %v", opts.MaxTTL, opts.TTL)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	l := &Lease{store: store, opts: opts, log: log.With("lease", opts.Key, "holder", opts.Holder)}
	if ls, ok := store.(adapters.LeaseStore); ok && !opts.skipExpiry {
		l.native = ls
	}
	return l, nil
}

// Native reports whether the store keeps the lease itself (adapters.LeaseStore).
func (l *Lease) Native() bool { return l.native != nil }

// margin is how early a holder stops before its tenure ends, for clock-rate error.
func (l *Lease) margin() time.Duration { return l.opts.TTL / 10 }

// Valid reports the token and whether the lease is held now.
func (l *Lease) Valid() (Token, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token, l.validLocked()
}

func (l *Lease) validLocked() bool {
	if t := l.tenure; t != nil {
		select {
		case <-t.Done():
			return false
		default:
			return time.Now().Before(t.ValidUntil())
		}
	}
	return !l.validUntil.IsZero() && time.Now().Before(l.validUntil)
}

// writer returns the store a guarded write goes through while the lease is held: the
// tenure's fenced view for a store-kept lease, else the store itself; ok is false when the
// lease is not held.
func (l *Lease) writer(store guardedBackend) (Token, guardedBackend, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.validLocked() {
		return l.token, nil, false
	}
	if l.tenure != nil {
		return l.token, l.tenure.Fenced(), true
	}
	return l.token, store, true
}

// Lost is closed when the tenure that the last Acquire started ends.
func (l *Lease) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (l *Lease) encode(epoch uint64, released bool) []byte {
	data, _ := json.Marshal(leaseData{Holder: l.opts.Holder, Epoch: epoch, TTLMS: l.opts.TTL.Milliseconds(), RenewedMS: time.Now().UnixMilli(), Released: released})
	return data
}

// Acquire waits until this controller holds the lease, or ctx ends. A standby polls the
// lease blob every TTL/8.
func (l *Lease) Acquire(ctx context.Context) (Token, error) {
	if l.native != nil {
		return l.campaign(ctx)
	}
	var seen uint64       // the version being watched
	var seenAt time.Time  // when this controller first saw it
	var ttl = l.opts.TTL  // the watched holder's TTL
	var lastHolder string // for logs
	poll := max(l.opts.TTL/8, time.Millisecond)
	for {
		cctx, cancel := context.WithTimeout(ctx, l.opts.TTL)
		b, err := l.store.GetBlob(cctx, l.opts.Key)
		cancel()
		var expect uint64
		take := false
		switch {
		case errors.Is(err, adapters.ErrNotFound):
			take = true
		case err != nil:
			if ctx.Err() != nil {
				return Token{}, ctx.Err()
			}
			l.log.Warn("reading the lease failed; trying again", "err", err)
		default:
			d, jerr := decodeLease(b.Data)
			if jerr != nil {
				l.log.Warn("the lease blob does not decode; treating it as held until it expires", "err", jerr)
			}
			if d.TTLMS > 0 {
				ttl = min(time.Duration(d.TTLMS)*time.Millisecond, l.opts.MaxTTL)
			}
			if b.Version != seen {
				seen, seenAt = b.Version, time.Now()
				if d.Holder != lastHolder {
					l.log.Info("standing by: the lease is held", "by", d.Holder, "ttl", ttl)
					lastHolder = d.Holder
				}
			}
			expect = b.Version
			take = d.Released || time.Since(seenAt) >= ttl || l.opts.skipExpiry
		}
		if take {
			sent := time.Now()
			cctx, cancel := context.WithTimeout(ctx, l.opts.TTL)
			v, err := l.store.PutBlob(cctx, l.opts.Key, expect, l.encode(0, false))
			cancel()
			if err == nil {
				return l.took(v, sent), nil
			}
			if ctx.Err() != nil {
				return Token{}, ctx.Err()
			}
			if !errors.Is(err, adapters.ErrConflict) {
				l.log.Warn("taking the lease failed; trying again", "err", err)
			}
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return Token{}, ctx.Err()
		case <-t.C:
		}
	}
}

func (l *Lease) took(version uint64, sent time.Time) Token {
	l.mu.Lock()
	l.token = Token{Holder: l.opts.Holder, Epoch: version}
	l.version = version
	l.validUntil = sent.Add(l.opts.TTL - l.margin())
	l.lost = make(chan struct{})
	tok := l.token
	l.mu.Unlock()
	l.log.Info("took the lease", "epoch", version)
	if l.opts.OnChange != nil {
		l.opts.OnChange(tok, true)
	}
	return tok
}

// Why says why the lease is not held now ("" when it is, or nothing went wrong): the
// reason the last tenure ended, or why the store cannot be asked for the lease.
func (l *Lease) Why() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.validLocked() {
		return ""
	}
	return l.why
}

func (l *Lease) setWhy(why string) {
	l.mu.Lock()
	l.why = why
	l.mu.Unlock()
}

// campaign is Acquire on a store-kept lease. A store that fails to answer (no quorum) is
// asked again every TTL/4, with a warning each time, until ctx ends, as the blob lease
// retries a failed read.
func (l *Lease) campaign(ctx context.Context) (Token, error) {
	var t adapters.Tenure
	for {
		var err error
		t, err = l.native.Campaign(ctx, l.opts.Key, l.opts.TTL, l.encode(0, false))
		if err == nil {
			break
		}
		if ctx.Err() != nil || errors.Is(err, adapters.ErrClosed) {
			return Token{}, err
		}
		// An operator reads this on /status: say what a store without an answer means,
		// whatever words the client library's error uses.
		l.setWhy("cannot campaign for the lease (no answer from the store: quorum lost or unreachable?): " + err.Error())
		l.log.Warn("cannot campaign for the lease; acting on nothing until the store answers", "err", err)
		tm := time.NewTimer(max(l.opts.TTL/4, time.Millisecond))
		select {
		case <-ctx.Done():
			tm.Stop()
			return Token{}, ctx.Err()
		case <-tm.C:
		}
	}
	l.mu.Lock()
	l.why = ""
	l.token = Token{Holder: l.opts.Holder, Epoch: t.Epoch()}
	l.version = t.Epoch()
	l.tenure = t
	l.validUntil = time.Time{}
	l.lost = make(chan struct{})
	tok := l.token
	l.mu.Unlock()
	l.log.Info("took the lease (kept by the store)", "epoch", tok.Epoch, "valid_for", time.Until(t.ValidUntil()).Round(time.Millisecond))
	if l.opts.OnChange != nil {
		l.opts.OnChange(tok, true)
	}
	return tok, nil
}

// Hold renews the lease every TTL/3 until ctx ends (it returns ctx's error, still holding:
// call Release or let it expire) or the tenure ends (ErrNotLeader wrapped with why). Lost
// is closed when it returns for a lost lease.
func (l *Lease) Hold(ctx context.Context) error {
	l.mu.Lock()
	t := l.tenure
	l.mu.Unlock()
	if t != nil {
		// The store's client renews; this waits for the store to end the tenure.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.Done():
			return l.lose(t.Err().Error())
		}
	}
	every := l.opts.TTL / 3
	retry := max(l.opts.TTL/20, time.Millisecond)
	next := every
	for {
		l.mu.Lock()
		until := l.validUntil
		l.mu.Unlock()
		wait := min(next, time.Until(until))
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if !time.Now().Before(until) {
			return l.lose("the tenure ended before a renewal succeeded (is the store reachable?)")
		}
		l.mu.Lock()
		tok, expect := l.token, l.version
		l.mu.Unlock()
		sent := time.Now()
		// A renewal that has not answered when the tenure ends is of no use: the call's
		// deadline is the tenure's end, so a store that never answers cannot hold it.
		cctx, cancel := context.WithDeadline(ctx, until)
		v, err := l.store.PutBlob(cctx, l.opts.Key, expect, l.encode(tok.Epoch, false))
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			l.version = v
			l.validUntil = sent.Add(l.opts.TTL - l.margin())
			l.mu.Unlock()
			next = every
		case errors.Is(err, adapters.ErrConflict):
			return l.lose("another controller wrote the lease: " + err.Error())
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			l.log.Warn("renewing the lease failed; trying again until the tenure ends", "err", err, "until", time.Until(until).Round(time.Millisecond))
			next = retry
		}
	}
}

// end ends the tenure locally: Valid turns false and Lost is closed. It returns the
// tenure's token, the lease blob version last written, and whether a tenure was running.
func (l *Lease) end() (Token, uint64, bool) {
	tok, v, _, held := l.endTenure()
	return tok, v, held
}

// endTenure is end, also returning the store-kept tenure that was running (nil if none).
func (l *Lease) endTenure() (Token, uint64, adapters.Tenure, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tenure
	held := !l.validUntil.IsZero() || t != nil
	l.validUntil = time.Time{}
	l.tenure = nil
	if l.lost != nil {
		select {
		case <-l.lost:
		default:
			close(l.lost)
		}
	}
	return l.token, l.version, t, held
}

func (l *Lease) lose(why string) error {
	tok, _, _ := l.end()
	l.setWhy("lost the lease: " + why)
	l.log.Error("lost the lease; stopping every step", "epoch", tok.Epoch, "why", why)
	if l.opts.OnChange != nil {
		l.opts.OnChange(tok, false)
	}
	return fmt.Errorf("%w (epoch %d): %s", ErrNotLeader, tok.Epoch, why)
}

// Release gives the lease up at once, so a standby need not wait a TTL: it marks the blob
// released by compare-and-set (a lease already taken by another is left alone).
func (l *Lease) Release(ctx context.Context) error {
	tok, expect, t, held := l.endTenure()
	if !held {
		return nil
	}
	if l.opts.OnChange != nil {
		l.opts.OnChange(tok, false)
	}
	if t != nil {
		err := t.Release(ctx)
		if err == nil {
			l.log.Info("released the lease", "epoch", tok.Epoch)
		}
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, l.opts.TTL)
	defer cancel()
	_, err := l.store.PutBlob(cctx, l.opts.Key, expect, l.encode(tok.Epoch, true))
	if errors.Is(err, adapters.ErrConflict) {
		return nil
	}
	if err == nil {
		l.log.Info("released the lease", "epoch", tok.Epoch)
	}
	return err
}

// guardedBackend is what a GuardedStore writes to.
type guardedBackend = interface {
	adapters.ShardMapStore
	adapters.BlobStore
}

// GuardedStore is a store whose every write is refused with ErrNotLeader unless the lease
// is held: the token a controller's steps carry. Reads pass through. On a store-kept lease
// (adapters.LeaseStore) each write also goes through the tenure's fenced view, so the
// store refuses it atomically once the tenure has ended, however late this process finds
// out; that refusal is ErrNotLeader too.
type GuardedStore struct {
	Store guardedBackend
	Lease *Lease
}

// check returns the store to write what through, or ErrNotLeader.
func (g GuardedStore) check(what string) (guardedBackend, error) {
	tok, w, ok := g.Lease.writer(g.Store)
	if !ok {
		return nil, fmt.Errorf("%w: refusing %s (last tenure %s)", ErrNotLeader, what, tok)
	}
	return w, nil
}

// fenced marks a write the store refused for the lease as ErrNotLeader.
func fenced(err error) error {
	if errors.Is(err, adapters.ErrLeaseLost) {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return err
}

// Read implements adapters.ShardMapStore.
func (g GuardedStore) Read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, error) {
	return g.Store.Read(ctx, db)
}

// CAS implements adapters.ShardMapStore, refused without the lease.
func (g GuardedStore) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	w, err := g.check("the record write of " + db.String())
	if err != nil {
		return 0, err
	}
	v, err := w.CAS(ctx, db, expect, next)
	return v, fenced(err)
}

// Watch implements adapters.ShardMapStore.
func (g GuardedStore) Watch(ctx context.Context, db adapters.DBRef, after uint64) (*shardmap.Record, error) {
	return g.Store.Watch(ctx, db, after)
}

// GetBlob implements adapters.BlobStore.
func (g GuardedStore) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	return g.Store.GetBlob(ctx, key)
}

// PutBlob implements adapters.BlobStore, refused without the lease.
func (g GuardedStore) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	w, err := g.check("the write of " + key)
	if err != nil {
		return 0, err
	}
	v, err := w.PutBlob(ctx, key, expect, data)
	return v, fenced(err)
}

// PutBlobs implements adapters.BlobBatcher, refused without the lease: every put in one
// transaction of the store it writes through, or an error matching errors.ErrUnsupported
// when that store cannot batch (nothing is written then).
func (g GuardedStore) PutBlobs(ctx context.Context, puts []adapters.BlobPut) ([]uint64, error) {
	what := "a batch of no blobs"
	if len(puts) > 0 {
		what = fmt.Sprintf("the write of %s and %d more", puts[0].Key, len(puts)-1)
	}
	w, err := g.check(what)
	if err != nil {
		return nil, err
	}
	vs, err := adapters.PutBlobs(ctx, w, puts)
	return vs, fenced(err)
}

// DeleteBlob implements adapters.BlobStore, refused without the lease.
func (g GuardedStore) DeleteBlob(ctx context.Context, key string, expect uint64) error {
	w, err := g.check("the delete of " + key)
	if err != nil {
		return err
	}
	return fenced(w.DeleteBlob(ctx, key, expect))
}

// ListBlobs implements adapters.BlobStore.
func (g GuardedStore) ListBlobs(ctx context.Context, prefix string) ([]adapters.Blob, error) {
	return g.Store.ListBlobs(ctx, prefix)
}
