package driver_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// TestTraceFromEnv: with LOAM_SPEC_TRACE set, a run appends its SpecEvents to the file as
// canonical JSON lines, in the order the machine emitted them; a second run appends.
func TestTraceFromEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spec.jsonl")
	t.Setenv(driver.TraceEnv, path)
	insts, _, ids := fakeInstances(3, 0)
	exec := &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: quiet}
	for _, gen := range []uint64{4, 5} {
		require.NoError(t, driver.Run(context.Background(), driver.ConfigPush(exec, configpush.Options{}),
			driver.Config[configpush.Input]{ID: "ns/app", Logger: quiet}, push(gen, ids)))
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	dec := machine.NewDecoder(f)
	var actions []string
	reloads := 0
	for {
		e, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Equal(t, configpush.Spec, e.Spec)
		require.Contains(t, configpush.Actions, e.Action)
		actions = append(actions, e.Action)
		if e.Action == configpush.ActReload {
			reloads++
		}
	}
	require.Equal(t, 6, reloads)
	require.Equal(t, configpush.ActPush, actions[0])
	require.Equal(t, configpush.ActDone, actions[len(actions)-1])
}

// TestTraceUnset: without LOAM_SPEC_TRACE nothing is written (and nothing fails).
func TestTraceUnset(t *testing.T) {
	t.Setenv(driver.TraceEnv, "")
	tf, err := driver.TraceFromEnv(quiet)
	require.NoError(t, err)
	require.Nil(t, tf)
}

// TestTraceOpenFails: a trace path that cannot be opened stops the run before anything is
// executed, naming the variable.
func TestTraceOpenFails(t *testing.T) {
	t.Setenv(driver.TraceEnv, filepath.Join(t.TempDir(), "missing", "spec.jsonl"))
	err := driver.Run(context.Background(), driver.ConfigPush(&driver.ConfigPushExecutor{}, configpush.Options{}),
		driver.Config[configpush.Input]{ID: "ns/app", Logger: quiet})
	require.ErrorContains(t, err, driver.TraceEnv)
}
