package driver

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"loam.dev/router/adapters"
)

// AuditPrefix is where the audit log lives in the BlobStore.
const AuditPrefix = "audit/"

// Audit events.
const (
	// AuditExec is written before a command is executed, AuditResult after (with the
	// reply's error or "ok" and the duration), AuditReport for a command that has no
	// reply (an outcome, an alert to people).
	AuditExec    = "exec"
	AuditResult  = "result"
	AuditReport  = "report"
	AuditRefused = "refused" // a command not executed: the lease was not held
	// AuditAction is an operator's or a controller's own action (map apply, lease taken,
	// cutover requested, drained).
	AuditAction = "action"
)

// AuditEntry is one line of the audit log: who did what, when, and how it went.
type AuditEntry struct {
	Key    string `json:"key"`
	At     int64  `json:"at"` // unix milliseconds, the writer's clock
	Holder string `json:"holder"`
	// Who is the authenticated identity that wrote the entry (a credential's name or a
	// client certificate's subject), stamped by the store server; Holder is what the writer
	// says of itself. Empty for an entry written to a store the writer opened itself.
	Who     string `json:"who,omitempty"`
	Epoch   uint64 `json:"epoch,omitempty"` // the lease tenure it ran under; 0 outside one (the CLI)
	Machine string `json:"machine,omitempty"`
	ID      string `json:"id,omitempty"`
	Event   string `json:"event"`
	Step    string `json:"step,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Target is what the command acts on: a router instance, a shard, "store", "files".
	Target     string `json:"target,omitempty"`
	What       string `json:"what"`
	Result     string `json:"result,omitempty"` // "ok" or the error
	Detail     string `json:"detail,omitempty"` // what the reply carried (a lag, a version)
	DurationMS int64  `json:"duration_ms,omitempty"`
	// DurationUS is the same in microseconds: with the time the entry's key holds (to the
	// nanosecond) it places the command on a timeline finer than At (PauseFromAudit).
	DurationUS int64 `json:"duration_us,omitempty"`
}

// OK reports whether the entry records a success (or is not a result at all).
func (e AuditEntry) OK() bool { return e.Result == "" || e.Result == "ok" }

// Audit appends entries to an append-only log in a BlobStore: each entry is its own blob,
// created with expect 0 and never rewritten, under audit/<epoch>/<time>-<seq>-<rand>, so the
// log reads back in tenure order and then in time order, and entries of two processes never
// collide. Who wrote an entry comes from the token function (the lease's Valid).
type Audit struct {
	store adapters.BlobStore
	who   func() Token
	log   *slog.Logger
	seq   atomic.Uint64
	// Failures counts entries that could not be written (logged at error level).
	Failures atomic.Uint64
}

// NewAudit returns an audit log in store, whose entries name who() as their author.
func NewAudit(store adapters.BlobStore, who func() Token, logger *slog.Logger) *Audit {
	if logger == nil {
		logger = slog.Default()
	}
	return &Audit{store: store, who: who, log: logger}
}

// Append writes e, filling Key, At, Holder and Epoch.
func (a *Audit) Append(ctx context.Context, e AuditEntry) error {
	return a.appendBatch(ctx, []AuditEntry{e}, time.Now())
}

// appendBatch writes entries as of now (their key and At are those of now, whenever they
// are written) as one blob: one store write, one fsync on bbolt. One entry is stored alone
// as an object, several as an array that ReadAudit returns in order, as if each had been
// appended alone (Audited records a step's exec entries so).
func (a *Audit) appendBatch(ctx context.Context, entries []AuditEntry, now time.Time) error {
	put, err := a.encodeBatch(entries, now)
	if err != nil {
		return a.failed(entries, put.Key, err)
	}
	return a.putBatch(ctx, entries, put)
}

// encodeBatch is the blob appendBatch writes: entries stamped with their key, the
// writer's tenure and now.
func (a *Audit) encodeBatch(entries []AuditEntry, now time.Time) (adapters.BlobPut, error) {
	tok := a.who()
	var r [3]byte
	_, _ = crand.Read(r[:])
	key := fmt.Sprintf("%s%020d/%020d-%06d-%s", AuditPrefix, tok.Epoch, now.UnixNano(), a.seq.Add(1)%1_000_000, hex.EncodeToString(r[:]))
	for i := range entries {
		entries[i].Holder, entries[i].Epoch, entries[i].At, entries[i].Key = tok.Holder, tok.Epoch, now.UnixMilli(), key
	}
	var data []byte
	var err error
	if len(entries) == 1 {
		data, err = json.Marshal(entries[0])
	} else {
		data, err = json.Marshal(entries)
	}
	return adapters.BlobPut{Key: key, Data: data}, err
}

// putBatch writes the blob encodeBatch made of entries.
func (a *Audit) putBatch(ctx context.Context, entries []AuditEntry, put adapters.BlobPut) error {
	if _, err := a.store.PutBlob(context.WithoutCancel(ctx), put.Key, 0, put.Data); err != nil {
		return a.failed(entries, put.Key, err)
	}
	return nil
}

// failed counts and logs entries not written under key.
func (a *Audit) failed(entries []AuditEntry, key string, err error) error {
	a.Failures.Add(uint64(len(entries)))
	a.log.Error("audit entry not written", "entry", entries[0].What, "event", entries[0].Event, "entries", len(entries), "err", err)
	return fmt.Errorf("driver: writing audit entry %s: %w", key, err)
}

// decodeAuditBlob reads an audit blob: one entry (an object) or a step's batch (an array
// of them, Audit.appendBatch). batch says which it was.
func decodeAuditBlob(data []byte) (entries []AuditEntry, batch bool, err error) {
	if i := bytes.IndexFunc(data, func(r rune) bool { return !unicode.IsSpace(r) }); i >= 0 && data[i] == '[' {
		if err := json.Unmarshal(data, &entries); err != nil {
			return nil, true, err
		}
		if len(entries) == 0 {
			return nil, true, errors.New("an empty batch of audit entries")
		}
		return entries, true, nil
	}
	var e AuditEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, false, err
	}
	return []AuditEntry{e}, false, nil
}

// StampAuditWho sets the Who of an audit entry's encoding to who: a store server calls it
// on every entry a client appends, so Who is the identity the server authenticated, not
// what the client claims. With keep, an entry that already names its Who keeps it (a
// controller's API relaying an operator's entry to a store server it is a client of).
// Data that is not an audit entry is refused.
//
// A step's batch (an array of entries) is stamped entry by entry.
func StampAuditWho(data []byte, who string, keep bool) ([]byte, error) {
	entries, batch, err := decodeAuditBlob(data)
	if err != nil {
		return nil, fmt.Errorf("driver: not an audit entry: %w", err)
	}
	for i := range entries {
		e := &entries[i]
		if e.Event == "" || e.What == "" {
			return nil, errors.New("driver: not an audit entry: it needs an event and a what")
		}
		if !keep || e.Who == "" {
			e.Who = who
		}
	}
	if !batch {
		return json.Marshal(entries[0])
	}
	return json.Marshal(entries)
}

// AuditFilter selects entries; zero fields select everything.
type AuditFilter struct {
	Machine, ID string
	Since       time.Time
	Limit       int // the last Limit entries
}

// newestFirst is a store that lists newest-first a page at a time (httpstore.Client).
type newestFirst interface {
	EachNewest(ctx context.Context, prefix string, fn func(adapters.Blob) bool) error
}

// ReadAudit returns the entries in log order. With a Limit, on a store that lists
// newest-first (a store server), only the pages holding the last Limit entries (or those
// since Since) are read, not the whole log.
func ReadAudit(ctx context.Context, store adapters.BlobStore, f AuditFilter) ([]AuditEntry, error) {
	var out []AuditEntry
	var bad error
	var lastAt int64
	// keep decodes one blob (an entry, or a step's batch of them whose keys it numbers
	// <key>#<i>) and adds the entries f selects, in log order or, newest, in reverse.
	keep := func(b adapters.Blob, newest bool) bool {
		entries, batch, err := decodeAuditBlob(b.Data)
		if err != nil {
			bad = fmt.Errorf("driver: audit entry %s: %w: %v", b.Key, adapters.ErrCorrupt, err)
			return false
		}
		if newest {
			slices.Reverse(entries)
		}
		for i, e := range entries {
			e.Key, lastAt = b.Key, e.At
			if batch {
				n := i
				if newest {
					n = len(entries) - 1 - i
				}
				e.Key = b.Key + "#" + strconv.Itoa(n)
			}
			if (f.Machine != "" && e.Machine != f.Machine) || (f.ID != "" && e.ID != f.ID) || (!f.Since.IsZero() && e.At < f.Since.UnixMilli()) {
				continue
			}
			out = append(out, e)
		}
		return true
	}
	if nf, ok := store.(newestFirst); ok && f.Limit > 0 {
		err := nf.EachNewest(ctx, AuditPrefix, func(b adapters.Blob) bool {
			// newest first: past Limit matches, or older than Since, nothing more is wanted
			return keep(b, true) && len(out) < f.Limit && (f.Since.IsZero() || lastAt >= f.Since.UnixMilli())
		})
		if err == nil {
			err = bad
		}
		if err != nil {
			return nil, fmt.Errorf("driver: reading the audit log: %w", err)
		}
		if len(out) > f.Limit {
			out = out[:f.Limit] // the rest of the last batch read
		}
		slices.Reverse(out)
		return out, nil
	}
	blobs, err := store.ListBlobs(ctx, AuditPrefix)
	if err != nil {
		return nil, fmt.Errorf("driver: reading the audit log: %w", err)
	}
	sort.Slice(blobs, func(i, j int) bool { return blobs[i].Key < blobs[j].Key })
	for _, b := range blobs {
		if !keep(b, false) {
			return nil, bad
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	return out, nil
}

// Audited wraps an executor of one machine so that every command it executes is preceded
// by an exec entry and followed by a result entry, and so that no command runs unless Valid
// says the lease is held: a deposed controller's step is refused, recorded as refused, and
// answered with nothing (the run is being stopped).
//
// The exec entry is written before the command runs (its write is the store-kept lease's
// check). Under Run the exec entries of one step are written together, as one blob, before
// any of its commands is started: in the same store transaction as the step's snapshot when
// both go to one store that batches (adapters.BlobBatcher: bbolt, memory, a GuardedStore
// over either), so a step costs one fsync on bbolt, not one for the save and one for the
// entries in series (nor one per command, as before that); on any other store (etcd's
// fenced view, the store server) once the snapshot is saved, and Run waits for both. A
// command the step's write did not cover (it failed, or Execute is called outside Run)
// writes its own entry first, as before; one whose step write the store refused for the
// lease is not executed (in one transaction with the snapshot, the save is refused with it
// and the run stops).
//
// The result entry is not in the critical path: the reply goes back to the machine at once
// and under Run the entry, keyed and timed as of the reply, is written with the snapshot of
// the step that feeds the reply to the machine (in its transaction, or once it is saved), so
// the log records a reply only when the machine's saved state holds it. A driver killed
// before that save leaves the command's exec entry without its result, and the next one,
// restored from the last saved snapshot, executes it again: the log never shows a command
// executed again after its result was recorded (TestEtcdLeaderKilledMidCutoverProcesses saw
// it when the entry was written as the reply came). Outside Run, Execute writes the entry
// off the command's path; Flush waits for it.
type Audited[In, Cmd any] struct {
	Kind, ID string // the machine: its kind and id ("cutover", "default/app")
	Next     Executor[In, Cmd]
	Audit    *Audit
	// Valid reports the lease; nil runs every command (a one-shot CLI run).
	Valid func() (Token, bool)
	// Detail, when set, says what a reply carried beyond its error (a lag, a version),
	// recorded in the result entry for people and for progress estimates.
	Detail func(In) string
	// OnResult, when set, sees every executed command with its reply and the entry that
	// recorded it (for metrics and progress).
	OnResult func(Cmd, In, AuditEntry)
	// Timeline, when set (the run's Config.Timeline), records each audit write as a
	// SpanAudit, so the time a command spends waiting on the audit log is told from the
	// time the system it acts on takes.
	Timeline *Timeline

	pending sync.WaitGroup // result entries being written

	mu sync.Mutex
	// written counts the commands, by auditKey, whose exec entry the step's write holds and
	// that have not executed yet; refused, those whose step write the store refused for the
	// lease (ErrNotLeader).
	written, refused map[string]int
}

// auditKey tells a step's commands apart: the step id, the attempt, the target and what
// the command prints.
func auditKey(e AuditEntry) string {
	return e.Step + "\x00" + strconv.Itoa(e.Attempt) + "\x00" + e.Target + "\x00" + e.What
}

// stepAuditor is an executor that records a step's commands before any of them starts,
// all at once (Audited): Run asks it for the step's write after the machine's On and makes
// that write with the step's snapshot save, before it starts the step's commands. The
// write also holds the result entries of the replies the step fed (resultAuditor).
type stepAuditor[Cmd any] interface {
	prepareStep(cmds []Cmd, results []*resultWrite) (stepWrite, bool)
}

// stepWrite is what the audit log records with a step's snapshot: the exec entries of its
// commands, encoded as one blob, and the result entries of the replies it fed, each its own
// blob keyed as of its reply. Run writes them in one transaction with the snapshot when both
// go to one store that batches (puts, into store), or else once the snapshot is saved
// (write: the exec entries, which Run waits for; the result entries are written off its
// path). Run then tells the outcome to done, before it starts any of the step's commands.
type stepWrite struct {
	puts  []adapters.BlobPut
	store adapters.BlobStore
	write func(ctx context.Context) error
	done  func(err error)
}

// prepareStep encodes the exec entries of a step's commands as one blob, beside the result
// entries of the replies the step fed; false when there is nothing to write (no commands
// and no results). The exec entries are left out when the lease is not held (Execute then
// refuses each command and records it); the results go with the snapshot whatever it is.
func (x *Audited[In, Cmd]) prepareStep(cmds []Cmd, results []*resultWrite) (stepWrite, bool) {
	if x.Valid != nil && len(cmds) > 0 {
		if _, ok := x.Valid(); !ok {
			cmds = nil
		}
	}
	var entries []AuditEntry
	var keys []string
	var puts []adapters.BlobPut
	if len(cmds) > 0 {
		entries = make([]AuditEntry, len(cmds))
		keys = make([]string, len(cmds))
		for i, c := range cmds {
			entries[i] = x.entry(c)
			entries[i].Event = AuditExec
			keys[i] = auditKey(entries[i])
		}
		put, err := x.Audit.encodeBatch(entries, time.Now())
		if err != nil {
			_ = x.Audit.failed(entries, put.Key, err)
			entries, keys = nil, nil // each command writes its own entry before it runs
		} else {
			puts = append(puts, put)
		}
	}
	for _, rw := range results {
		puts = append(puts, rw.put)
	}
	if len(puts) == 0 {
		return stepWrite{}, false
	}
	return stepWrite{puts: puts, store: x.Audit.store,
		write: func(ctx context.Context) error {
			x.writeResults(ctx, results)
			if len(entries) == 0 {
				return nil
			}
			return x.timed(entries, func() error { return x.Audit.putBatch(ctx, entries, puts[0]) })
		},
		done: func(err error) {
			if len(keys) > 0 {
				x.stepWritten(keys, err)
			}
		},
	}, true
}

// auditStep writes the exec entries of a step's commands in one store write, alone (the
// tests' way: Run writes them with the step's snapshot).
func (x *Audited[In, Cmd]) auditStep(ctx context.Context, cmds []Cmd) {
	if sw, ok := x.prepareStep(cmds, nil); ok {
		sw.done(sw.write(ctx))
	}
}

// stepWritten records the outcome of a step's write of the exec entries keyed keys: held
// (each command's Execute does not write its entry again), refused for the lease (none of
// them executes), or failed otherwise (each writes its own entry before it runs).
func (x *Audited[In, Cmd]) stepWritten(keys []string, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	mark := &x.written
	switch {
	case errors.Is(err, ErrNotLeader):
		mark = &x.refused
	case err != nil:
		return
	}
	if *mark == nil {
		*mark = map[string]int{}
	}
	for _, k := range keys {
		(*mark)[k]++
	}
}

// take reports whether the step's write holds the exec entry of the command keyed k (and
// forgets it), or refused it for the lease.
func (x *Audited[In, Cmd]) take(k string) (written, refused bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, m := range []map[string]int{x.written, x.refused} {
		if m[k] > 0 {
			if m[k]--; m[k] == 0 {
				delete(m, k)
			}
			return i == 0, i == 1
		}
	}
	return false, false
}

// entry is the audit entry naming command c.
func (x *Audited[In, Cmd]) entry(c Cmd) AuditEntry {
	e := AuditEntry{Machine: x.Kind, ID: x.ID, What: describe(c), Target: target(c)}
	e.Step, e.Attempt = stepOf(c)
	return e
}

// write writes entries (one, or a step's exec entries) in one store write as of now, and
// records the write in x.Timeline.
func (x *Audited[In, Cmd]) write(ctx context.Context, entries []AuditEntry, now time.Time) error {
	return x.timed(entries, func() error { return x.Audit.appendBatch(ctx, entries, now) })
}

// timed runs write, the write of entries, and records it in x.Timeline as a SpanAudit.
func (x *Audited[In, Cmd]) timed(entries []AuditEntry, write func() error) error {
	if x.Timeline == nil {
		return write()
	}
	t0 := time.Now()
	err := write()
	res := "ok"
	if err != nil {
		res = err.Error()
	}
	e := entries[0]
	what := e.Event + " " + e.What
	if len(entries) > 1 {
		what += " (+" + strconv.Itoa(len(entries)-1) + ")"
	}
	x.Timeline.Add(Span{Kind: SpanAudit, Step: e.Step, What: what, Target: e.Target, Result: res, N: len(entries), Start: t0, End: time.Now()})
	return err
}

// Flush waits until every result entry handed off so far is written. Run calls it before
// it returns.
func (x *Audited[In, Cmd]) Flush() { x.pending.Wait() }

// append writes e as of now and records the write in x.Timeline.
func (x *Audited[In, Cmd]) append(ctx context.Context, e AuditEntry, now time.Time) error {
	return x.write(ctx, []AuditEntry{e}, now)
}

// Execute implements Executor. The result entry is written off the command's path, as of
// the reply (Flush waits for it).
func (x *Audited[In, Cmd]) Execute(ctx context.Context, c Cmd) (In, bool) {
	in, reply, rw := x.executeDeferred(ctx, c)
	if rw != nil {
		x.writeResults(ctx, []*resultWrite{rw})
	}
	return in, reply
}

// resultWrite is the result entry of a reply, encoded as of the reply: Run writes it with
// the snapshot of the step that feeds the reply (stepWrite).
type resultWrite struct {
	put   adapters.BlobPut
	entry AuditEntry
}

// resultAuditor is an executor that leaves the write of a reply's result entry to Run
// (Audited): Run carries the entry with the reply and writes it with the snapshot of the
// step that feeds the reply.
type resultAuditor[In, Cmd any] interface {
	executeDeferred(ctx context.Context, c Cmd) (In, bool, *resultWrite)
}

// writeResults writes the result entries rws off the caller's path, each its own blob
// keyed as of its reply; Flush waits for them.
func (x *Audited[In, Cmd]) writeResults(ctx context.Context, rws []*resultWrite) {
	ctx = context.WithoutCancel(ctx)
	for _, rw := range rws {
		x.pending.Add(1)
		go func() {
			defer x.pending.Done()
			entries := []AuditEntry{rw.entry}
			_ = x.timed(entries, func() error { return x.Audit.putBatch(ctx, entries, rw.put) })
		}()
	}
}

// executeDeferred is Execute but for the result entry of a reply, which it returns encoded
// as of the reply for the caller to write (nil when there was no reply: a report entry is
// written here, off the command's path, as there is no step to write it with).
func (x *Audited[In, Cmd]) executeDeferred(ctx context.Context, c Cmd) (In, bool, *resultWrite) {
	base := x.entry(c)
	if x.Valid != nil {
		if tok, ok := x.Valid(); !ok {
			e := base
			e.Event, e.Result = AuditRefused, ErrNotLeader.Error()
			_ = x.Audit.Append(ctx, e)
			x.Audit.log.Warn("command refused: the lease is not held", "machine", x.Kind, "id", x.ID, "cmd", base.What, "tenure", tok)
			var zero In
			<-ctx.Done()
			return zero, false, nil
		}
	}
	e := base
	e.Event = AuditExec
	written, refused := x.take(auditKey(base))
	var err error
	switch {
	case refused:
		err = ErrNotLeader
	case !written:
		err = x.append(ctx, e, time.Now())
	}
	if errors.Is(err, ErrNotLeader) {
		// The audit log is written through the guarded store (a store-kept lease): the
		// store refused the exec entry because the tenure has ended, so the command is
		// not executed either.
		x.Audit.log.Warn("command refused: the store refused its exec entry for the lease", "machine", x.Kind, "id", x.ID, "cmd", base.What, "err", err)
		var zero In
		<-ctx.Done()
		return zero, false, nil
	}
	t0 := time.Now()
	in, reply := x.Next.Execute(ctx, c)
	end := time.Now()
	e = base
	e.DurationMS, e.DurationUS = end.Sub(t0).Milliseconds(), end.Sub(t0).Microseconds()
	var rw *resultWrite
	if reply {
		e.Event, e.Result = AuditResult, resultOf(in)
		if x.Detail != nil {
			e.Detail = x.Detail(in)
		}
		entries := []AuditEntry{e}
		if put, err := x.Audit.encodeBatch(entries, end); err != nil {
			_ = x.Audit.failed(entries, put.Key, err)
		} else {
			rw = &resultWrite{put: put, entry: entries[0]}
		}
	} else {
		e.Event, e.Result = AuditReport, "ok"
		x.pending.Add(1)
		go func() {
			defer x.pending.Done()
			_ = x.append(context.WithoutCancel(ctx), e, end)
		}()
	}
	if x.OnResult != nil {
		x.OnResult(c, in, e)
	}
	return in, reply, rw
}

func describe(c any) string {
	if s, ok := c.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", c)
}

// field returns the exported field name of struct v, if it has one.
func field(v any, name string) (reflect.Value, bool) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return reflect.Value{}, false
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := rv.FieldByName(name)
	return f, f.IsValid()
}

// stepOf reads a command's Step and Attempt fields (every machine's commands carry a step).
func stepOf(c any) (string, int) {
	var step string
	var attempt int
	if f, ok := field(c, "Step"); ok && f.Kind() == reflect.String {
		step = f.String()
	}
	if f, ok := field(c, "Attempt"); ok && f.CanInt() {
		attempt = int(f.Int())
	}
	return step, attempt
}

// target names what a command acts on, for the audit and its pictures.
func target(c any) string {
	for _, name := range []string{"Instance", "Shard"} {
		if f, ok := field(c, name); ok && f.Kind() == reflect.String && f.String() != "" {
			return f.String()
		}
	}
	t := fmt.Sprintf("%T", c)
	t = t[strings.LastIndex(t, ".")+1:]
	switch {
	case strings.Contains(t, "Record"):
		return "store"
	case strings.Contains(t, "Files"):
		return "files"
	case strings.Contains(t, "Alert"):
		return "alerts"
	case strings.Contains(t, "Instances"):
		return "roster"
	}
	return "controller"
}

// resultOf reads a reply's Err field: "ok" when it is nil.
func resultOf(in any) string {
	if f, ok := field(in, "Err"); ok && f.Kind() == reflect.Interface && !f.IsNil() {
		if err, ok := f.Interface().(error); ok {
			return err.Error()
		}
	}
	return "ok"
}
