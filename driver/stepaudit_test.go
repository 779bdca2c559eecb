package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// stepOfCmd reads the step= field a cutover command prints.
func stepOfCmd(c fmt.Stringer) string {
	for _, f := range strings.Fields(c.String()) {
		if v, ok := strings.CutPrefix(f, "step="); ok {
			return v
		}
	}
	return ""
}

// savedBeforeExec is an executor that, as each command starts, checks the safety argument
// of Run's step against the store as it is at that instant: the machine's saved snapshot
// holds the command as sent and unanswered (what a driver that starts from it re-issues
// or, for a copy or a CUTOVER, finds out about: Restarted), and the audit log holds its
// exec entry.
type savedBeforeExec struct {
	t     *testing.T
	store adapters.BlobStore
	next  driver.Executor[cutover.Input, cutover.Command]
	mu    sync.Mutex
	bad   []string
	n     atomic.Int64
}

// sentIn reports whether the snapshot's JSON holds an op of step in state sent (1).
func sentIn(t *testing.T, data []byte, step string) bool {
	var snap struct {
		Ops []struct {
			Step  string
			State int
		}
	}
	require.NoError(t, json.Unmarshal(data, &snap))
	for _, o := range snap.Ops {
		if o.Step == step && o.State == 1 {
			return true
		}
	}
	return false
}

func (x *savedBeforeExec) Execute(ctx context.Context, c cutover.Command) (cutover.Input, bool) {
	step := stepOfCmd(c)
	var problems []string
	b, err := x.store.GetBlob(ctx, driver.SnapshotKey("cutover", "ns/app"))
	sent := err == nil && sentIn(x.t, b.Data, step)
	entries, err := driver.ReadAudit(ctx, x.store, driver.AuditFilter{Machine: "cutover"})
	require.NoError(x.t, err)
	logged := false
	for _, e := range entries {
		logged = logged || (e.Event == driver.AuditExec && e.Step == step && e.What == c.String())
	}
	if !logged {
		problems = append(problems, "no exec entry in the audit log")
	}
	in, reply := x.next.Execute(ctx, c)
	if reply && !sent {
		// A command without a reply (a report) is not an op; every other one is.
		problems = append(problems, "the saved snapshot does not hold it as sent")
	}
	x.n.Add(1)
	if len(problems) > 0 {
		x.mu.Lock()
		x.bad = append(x.bad, c.String()+": "+strings.Join(problems, "; "))
		x.mu.Unlock()
	}
	return in, reply
}

// TestCommandsRunAfterTheirStepIsSavedAndAudited: through Run and an Audited executor, every
// command of a whole cutover starts only once the snapshot of the step that issued it is
// saved (a driver killed at that instant would re-issue it) and its exec entry is in the
// audit log, though the exec entries of a step are now written together, in one store
// write after the save: the number of exec writes is at most the number of saves.
func TestCommandsRunAfterTheirStepIsSavedAndAudited(t *testing.T) {
	s := newCutoverSetup(t)
	blobs := &countingBlobs{Store: memstore.New()}
	tok := driver.Token{Holder: "test", Epoch: 1}
	check := &savedBeforeExec{t: t, store: blobs, next: s.exec}
	audited := &driver.Audited[cutover.Input, cutover.Command]{Kind: "cutover", ID: "ns/app", Next: check,
		Audit: driver.NewAudit(blobs, func() driver.Token { return tok }, quiet)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, driver.Run(ctx, driver.Cutover(audited),
		driver.Config[cutover.Input]{ID: "ns/app", Store: blobs, Logger: quiet, Trace: machine.Discard}, cutover.Input(s.start)))
	require.Equal(t, cutover.Finalized, (<-s.done).Outcome)
	require.Greater(t, check.n.Load(), int64(20), "a whole cutover's commands were checked")
	require.Empty(t, check.bad, "commands that started before their step was saved and audited")

	entries, err := driver.ReadAudit(ctx, blobs, driver.AuditFilter{Machine: "cutover"})
	require.NoError(t, err)
	execs := 0
	for _, e := range entries {
		if e.Event == driver.AuditExec {
			execs++
		}
	}
	require.EqualValues(t, check.n.Load(), execs, "one exec entry per command")
	saves, execWrites := blobs.writes()
	require.Less(t, execWrites, execs, "some step's exec entries share one write")
	require.LessOrEqual(t, execWrites, saves, "at most one exec write per step (each step saves once)")
}

// countingBlobs counts the snapshot saves and the audit writes holding exec entries.
type countingBlobs struct {
	*memstore.Store
	mu          sync.Mutex
	saves, exec int
}

func (s *countingBlobs) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	s.mu.Lock()
	switch {
	case strings.HasPrefix(key, "machine/"):
		s.saves++
	case strings.HasPrefix(key, driver.AuditPrefix) && strings.Contains(string(data), `"event":"exec"`):
		s.exec++
	}
	s.mu.Unlock()
	return s.Store.PutBlob(ctx, key, expect, data)
}

func (s *countingBlobs) writes() (saves, exec int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves, s.exec
}

// refusingAudit is a store whose audit writes are refused for the lease, as a GuardedStore
// on a store-kept lease refuses a deposed controller's.
type refusingAudit struct{ *memstore.Store }

func (s refusingAudit) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if strings.HasPrefix(key, driver.AuditPrefix) {
		return 0, fmt.Errorf("store: %w", driver.ErrNotLeader)
	}
	return s.Store.PutBlob(ctx, key, expect, data)
}

// TestStepAuditRefusedRunsNothing: when the store refuses a step's exec entries for the
// lease, none of the step's commands is executed (each waits for the run to be stopped).
func TestStepAuditRefusedRunsNothing(t *testing.T) {
	s := newCutoverSetup(t)
	blobs := refusingAudit{memstore.New()}
	var ran atomic.Int64
	next := driver.ExecutorFunc[cutover.Input, cutover.Command](func(ctx context.Context, c cutover.Command) (cutover.Input, bool) {
		ran.Add(1)
		return s.exec.Execute(ctx, c)
	})
	audited := &driver.Audited[cutover.Input, cutover.Command]{Kind: "cutover", ID: "ns/app", Next: next,
		Audit: driver.NewAudit(blobs, func() driver.Token { return driver.Token{Holder: "deposed", Epoch: 1} }, quiet)}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- driver.Run(ctx, driver.Cutover(audited),
			driver.Config[cutover.Input]{ID: "ns/app", Store: blobs, Logger: quiet, Trace: machine.Discard}, cutover.Input(s.start))
	}()
	// The first step is saved; its commands are refused and wait for the run to stop.
	require.Eventually(t, func() bool {
		_, err := blobs.GetBlob(context.Background(), driver.SnapshotKey("cutover", "ns/app"))
		return err == nil
	}, 60*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Zero(t, ran.Load(), "a command ran though its exec entry was refused")
}

// newestFirstStore lists the audit log newest-first, as a store server does (EachNewest).
type newestFirstStore struct{ *memstore.Store }

func (s newestFirstStore) EachNewest(ctx context.Context, prefix string, fn func(adapters.Blob) bool) error {
	bs, err := s.ListBlobs(ctx, prefix)
	if err != nil {
		return err
	}
	for i := len(bs) - 1; i >= 0; i-- {
		if !fn(bs[i]) {
			break
		}
	}
	return nil
}

// TestReadAuditBatches: a step's exec entries, written as one blob, read back in the order
// they were written among the single entries around them, each with a key of its own, both
// from a store listed in key order and from one read newest-first with a Limit that cuts
// the batch.
func TestReadAuditBatches(t *testing.T) {
	store := memstore.New()
	ctx := context.Background()
	steps := []string{"s/1/pause/r1", "s/1/pause/r2", "s/1/pause/r3"}
	var cmds []cutover.Command
	for _, st := range steps {
		cmds = append(cmds, cutover.Pause{Step: st, Instance: st[len(st)-2:], Database: "app"})
	}
	// Through Run's path: Audited writes the batch, then each command its result.
	var n atomic.Int64
	next := driver.ExecutorFunc[cutover.Input, cutover.Command](func(ctx context.Context, c cutover.Command) (cutover.Input, bool) {
		n.Add(1)
		return cutover.Reply{Step: stepOfCmd(c)}, true
	})
	audit := driver.NewAudit(store, func() driver.Token { return driver.Token{Holder: "t", Epoch: 1} }, quiet)
	require.NoError(t, audit.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, What: "before"}))
	x := &driver.Audited[cutover.Input, cutover.Command]{Kind: "cutover", ID: "ns/app", Next: next, Audit: audit}
	driver.AuditStep(x, ctx, cmds)
	blobs, err := store.ListBlobs(ctx, driver.AuditPrefix)
	require.NoError(t, err)
	require.Len(t, blobs, 2, "the three exec entries are one blob")
	for _, c := range cmds {
		x.Execute(ctx, c)
	}
	x.Flush()
	blobs, err = store.ListBlobs(ctx, driver.AuditPrefix)
	require.NoError(t, err)
	require.Len(t, blobs, 5, "no exec entry written again by Execute; a result entry each")

	all, err := driver.ReadAudit(ctx, store, driver.AuditFilter{})
	require.NoError(t, err)
	require.Len(t, all, 7)
	require.Equal(t, "before", all[0].What)
	keys := map[string]bool{}
	for i, st := range steps {
		require.Equal(t, driver.AuditExec, all[1+i].Event)
		require.Equal(t, st, all[1+i].Step, "the batch in order")
		keys[all[1+i].Key] = true
	}
	require.Len(t, keys, 3, "each entry of the batch has its own key")
	for _, e := range all[4:] {
		require.Equal(t, driver.AuditResult, e.Event)
	}
	// Newest-first with a Limit cutting the batch: the last entries, in log order.
	last, err := driver.ReadAudit(ctx, newestFirstStore{store}, driver.AuditFilter{Limit: 4})
	require.NoError(t, err)
	require.Equal(t, all[3:], last)
	last, err = driver.ReadAudit(ctx, newestFirstStore{store}, driver.AuditFilter{Limit: 6})
	require.NoError(t, err)
	require.Equal(t, all[1:], last)
}
