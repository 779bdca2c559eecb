package driver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
	"loam.dev/router/machine/vreshard"
)

// fakeWorkflows is vtctld's workflow API as the executor sees it: one workflow, its
// traffic state, and every mutating call recorded.
type fakeWorkflows struct {
	adapters.VitessWorkflows
	exists         bool
	source, target []string
	reads, writes  bool
	calls          []string
}

func (f *fakeWorkflows) Workflow(context.Context, string, string) (adapters.WorkflowState, error) {
	if !f.exists {
		return adapters.WorkflowState{}, &adapters.VitessError{Op: "GetWorkflows", Err: fmt.Errorf("%w: no workflow", adapters.ErrNotFound)}
	}
	return adapters.WorkflowState{Source: f.source, Target: f.target, ReadsSwitched: f.reads, WritesSwitched: f.writes}, nil
}

func (f *fakeWorkflows) ReshardCreate(_ context.Context, _, _ string, _, source, target []string) error {
	f.calls = append(f.calls, fmt.Sprint("create ", source, target))
	f.exists, f.source, f.target = true, source, target
	return nil
}

func (f *fakeWorkflows) SwitchTraffic(_ context.Context, _, _ string, types []adapters.TabletType, reverse bool) error {
	f.calls = append(f.calls, fmt.Sprint("switch ", types, reverse))
	return nil
}

func (f *fakeWorkflows) CompleteWorkflow(context.Context, string, string) error {
	f.calls = append(f.calls, "complete")
	return &adapters.VitessError{Op: "MoveTablesComplete", Err: fmt.Errorf("%w: workflow split not found", adapters.ErrNotFound)}
}

// TestVReshardExecutorIdempotent: what the executor makes of a command sent again after a
// crash: a workflow that exists with the same shards is created, one with other shards is
// refused for good; a switch to where the traffic already is sends nothing; a complete of
// a workflow already gone is done; a failed check through vtgate is the verdict.
func TestVReshardExecutorIdempotent(t *testing.T) {
	ctx := context.Background()
	f := &fakeWorkflows{}
	e := &driver.VReshardExecutor{Workflows: f}
	create := vreshard.Create{Step: "c", Attempt: 1, Keyspace: "rs", Workflow: "split", Cell: "zone1", Source: []string{"0"}, Target: []string{"-80", "80-"}}
	in, _ := e.Execute(ctx, create)
	require.NoError(t, in.(vreshard.Reply).Err)
	in, _ = e.Execute(ctx, create)
	require.NoError(t, in.(vreshard.Reply).Err, "created before: done")
	require.Len(t, f.calls, 1, "ReshardCreate sent once")
	other := create
	other.Target = []string{"-40", "40-"}
	in, _ = e.Execute(ctx, other)
	require.True(t, in.(vreshard.Reply).Permanent)
	require.ErrorContains(t, in.(vreshard.Reply).Err, "exists but reshards")

	f.reads = true
	in, _ = e.Execute(ctx, vreshard.Switch{Step: "r", Attempt: 1, Types: []string{"replica", "rdonly"}})
	require.NoError(t, in.(vreshard.Reply).Err)
	require.Len(t, f.calls, 1, "reads already switched: nothing sent")
	in, _ = e.Execute(ctx, vreshard.Switch{Step: "w", Attempt: 1, Types: []string{"primary"}})
	require.NoError(t, in.(vreshard.Reply).Err)
	require.Equal(t, "switch [PRIMARY] false", f.calls[1])
	in, _ = e.Execute(ctx, vreshard.Switch{Step: "b", Attempt: 1, Types: []string{"primary", "replica", "rdonly"}, Reverse: true})
	require.NoError(t, in.(vreshard.Reply).Err)
	require.Equal(t, "switch [PRIMARY REPLICA RDONLY] true", f.calls[2], "reads are switched: reversing them is not a no-op")

	in, _ = e.Execute(ctx, vreshard.Complete{Step: "k", Attempt: 1})
	require.NoError(t, in.(vreshard.Reply).Err, "a workflow gone after a complete is done")

	e.Verify = func(context.Context, string, []string) error {
		return fmt.Errorf("%w: 3 rows missing", driver.ErrVerifyFailed)
	}
	in, _ = e.Execute(ctx, vreshard.Verify{Step: "v", Attempt: 1})
	require.True(t, in.(vreshard.Reply).Permanent)
	e.Verify = func(context.Context, string, []string) error { return errors.New("vtgate: connection refused") }
	in, _ = e.Execute(ctx, vreshard.Verify{Step: "v", Attempt: 1})
	require.False(t, in.(vreshard.Reply).Permanent, "a check that could not run is retried")
}
