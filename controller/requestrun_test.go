package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/cutover"
)

// filedRequests runs a controller on a store holding, for each kind of request, a request
// whose outcome is already in the history and no snapshot: what a controller that died
// between filing a request and clearing it leaves. It returns the store once both requests
// are gone.
func filedRequests(t *testing.T, setup func(ctx context.Context, st *memstore.Store, ref adapters.DBRef)) (*memstore.Store, adapters.DBRef) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st := memstore.New()
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "10.0.0.1", Port: 5432, Database: "app"},
		shardmap.Backend{Host: "10.0.0.2", Port: 5432, Database: "app"})
	_, err := st.CAS(ctx, ref, 0, rec)
	require.NoError(t, err)
	setup(ctx, st, ref)
	cfg := controller.Config{Controller: controller.ControllerConfig{ID: "ctl", Listen: "off", LeaseTTL: controller.Duration{Duration: time.Second}},
		Databases: []controller.DatabaseConfig{{Name: "app", InDoubt: controller.InDoubtConfig{Enabled: new(bool)}}}}
	ctl, err := controller.New(cfg, controller.WithStore(st), controller.WithRequestPoll(10*time.Millisecond),
		controller.WithFleets(func(context.Context, *controller.DatabaseConfig) (*controller.Fleet, error) {
			return controller.NewFleet(), nil
		}))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	gone := func(key string) bool { _, err := st.GetBlob(ctx, key); return errors.Is(err, adapters.ErrNotFound) }
	require.Eventually(t, func() bool {
		return gone(controller.FailoverRequestKey(ref)) && gone(controller.CutoverRequestKey(ref))
	},
		time.Minute, 10*time.Millisecond, "the filed requests are cleared")
	ctl.Drain()
	require.NoError(t, <-done)
	return st, ref
}

// TestFiledRequestsAreNeverRunAgain: a cutover and a failover whose outcomes were filed but
// whose requests were not yet removed (the controller died in between) are cleared by the
// next controller without running their machines again: no command of either is executed,
// the record is untouched, and the history keeps the first outcome.
func TestFiledRequestsAreNeverRunAgain(t *testing.T) {
	var fo controller.FailoverRequest
	var co controller.CutoverRequest
	st, ref := filedRequests(t, func(ctx context.Context, st *memstore.Store, ref adapters.DBRef) {
		r := controller.Requests{Store: st, By: "test"}
		rec, err := st.Read(ctx, ref)
		require.NoError(t, err)
		fo, err = r.Failover(ctx, ref, rec.Shards[0].Name, shardmap.Backend{Host: "10.0.0.9", Port: 5432})
		require.NoError(t, err)
		co, err = r.StartCutover(ctx, ref, cutover.Plan{Designated: "r1"})
		require.NoError(t, err)
		for key, res := range map[string]any{
			controller.FailoverHistoryKey(ref, fo.At):  controller.FailoverResult{Request: fo, Outcome: "repointed", Generation: 2},
			controller.CutoverHistoryKey(ref, co.From): controller.CutoverResult{Request: co, Outcome: "finalized", Generation: 2},
		} {
			data, err := json.Marshal(res)
			require.NoError(t, err)
			_, err = st.PutBlob(ctx, key, 0, data)
			require.NoError(t, err)
		}
	})
	ctx := t.Context()
	entries, err := driver.ReadAudit(ctx, st, driver.AuditFilter{})
	require.NoError(t, err)
	for _, e := range entries {
		if e.Machine == "failover" || e.Machine == "cutover" {
			require.NotEqual(t, driver.AuditExec, e.Event, "a filed request ran again: %+v", e)
			require.NotContains(t, e.What, "requested by", "a filed request was started again: %+v", e)
		}
	}
	rec, err := st.Read(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, uint64(1), rec.Generation, "the record is untouched")
	f, _, err := controller.GetJSON[controller.FailoverResult](ctx, st, controller.FailoverHistoryKey(ref, fo.At))
	require.NoError(t, err)
	require.Equal(t, "repointed", f.Outcome, "the history keeps the first outcome")
	c, _, err := controller.GetJSON[controller.CutoverResult](ctx, st, controller.CutoverHistoryKey(ref, co.From))
	require.NoError(t, err)
	require.Equal(t, "finalized", c.Outcome)
}
