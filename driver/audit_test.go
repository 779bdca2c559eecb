package driver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// TestAuditedRecordsEveryStep: every command of a push is in the audit log twice — before
// it ran and with its result — in order, with its step, attempt, target and author; a
// failed reload carries the router's error; the outcome is a report.
func TestAuditedRecordsEveryStep(t *testing.T) {
	insts, fakes, ids := fakeInstances(2, 0)
	fakes[1].failApply = 1
	store := memstore.New()
	tok := driver.Token{Holder: "ctl-a", Epoch: 7}
	audit := driver.NewAudit(store, func() driver.Token { return tok }, quiet)
	exec := &driver.Audited[configpush.Input, configpush.Command]{Kind: "configpush", ID: "ns/app",
		Next:  &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: quiet},
		Audit: audit, Valid: func() (driver.Token, bool) { return tok, true }}
	opts := configpush.Options{Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	require.NoError(t, driver.Run(context.Background(), driver.ConfigPush(exec, opts),
		driver.Config[configpush.Input]{ID: "ns/app", Logger: quiet, Trace: machine.Discard}, push(4, ids)))

	entries, err := driver.ReadAudit(t.Context(), store, driver.AuditFilter{Machine: "configpush"})
	require.NoError(t, err)
	open := map[string]int{}
	var failed, reports int
	for i, e := range entries {
		require.Equal(t, "ctl-a", e.Holder)
		require.Equal(t, uint64(7), e.Epoch)
		require.Equal(t, "ns/app", e.ID)
		if i > 0 {
			require.Greater(t, e.Key, entries[i-1].Key, "entries read back in the order written")
		}
		key := e.Step + "#" + string(rune('0'+e.Attempt))
		switch e.Event {
		case driver.AuditExec:
			open[key]++
		case driver.AuditResult:
			require.Equal(t, 1, open[key], "a result without its exec entry: %+v", e)
			open[key]--
			if e.Result != "ok" {
				failed++
				require.Equal(t, "pgdog-1", e.Target)
				require.Contains(t, e.Result, "config error")
			}
		case driver.AuditReport:
			require.Equal(t, 1, open[key], "a report without its exec entry: %+v", e)
			open[key]--
			reports++
			require.Contains(t, e.What, "Outcome gen=4")
		}
	}
	for k, n := range open {
		require.Zero(t, n, "%s: executed without a result entry", k)
	}
	require.Equal(t, 1, failed, "the one failed reload is recorded as failed")
	require.Equal(t, 1, reports)
	require.Equal(t, 2, fakes[1].calls, "the failed reload was retried")
}

// TestAuditedRefusesWithoutLease: with the lease gone, no command reaches the executor and
// the refusal is recorded.
func TestAuditedRefusesWithoutLease(t *testing.T) {
	insts, fakes, ids := fakeInstances(1, 0)
	store := memstore.New()
	tok := driver.Token{Holder: "ctl-a", Epoch: 3}
	audit := driver.NewAudit(store, func() driver.Token { return tok }, quiet)
	exec := &driver.Audited[configpush.Input, configpush.Command]{Kind: "configpush", ID: "ns/app",
		Next:  &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: quiet},
		Audit: audit, Valid: func() (driver.Token, bool) { return tok, false }}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := driver.Run(ctx, driver.ConfigPush(exec, configpush.Options{}),
		driver.Config[configpush.Input]{ID: "ns/app", Logger: quiet, Trace: machine.Discard}, push(4, ids))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, fakes[0].calls)
	entries, err := driver.ReadAudit(t.Context(), store, driver.AuditFilter{})
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		require.Equal(t, driver.AuditRefused, e.Event)
	}
}
