package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/controller"
	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

type vs = map[string]fencing.Version

func rep(p string, v fencing.Version) fencemigrate.Input {
	return fencemigrate.PodReported{Pod: p, Version: v}
}

// TestFencingRosterMerge: what one fencing command feeds the machine for each combination of
// roster, reports and pods the machine already knows.
func TestFencingRosterMerge(t *testing.T) {
	for _, c := range []struct {
		name              string
		roster            []string
		reported, known   vs
		want              []fencemigrate.Input
		unreported, extra []string
		gone              []string
	}{
		{name: "roster pods that never reported are fed as O",
			roster: []string{"b", "a"},
			want:   []fencemigrate.Input{rep("a", fencing.O), rep("b", fencing.O)}, unreported: []string{"a", "b"}},
		{name: "a reported roster pod is fed at its version",
			roster: []string{"a", "b"}, reported: vs{"a": fencing.A},
			want: []fencemigrate.Input{rep("a", fencing.A), rep("b", fencing.O)}, unreported: []string{"b"}},
		{name: "a known roster pod whose report is gone counts as O again",
			roster: []string{"a", "b"}, reported: vs{"a": fencing.A}, known: vs{"a": fencing.A, "b": fencing.A},
			want: []fencemigrate.Input{rep("a", fencing.A), rep("b", fencing.O)}, unreported: []string{"b"}},
		{name: "a reporting pod outside the roster is fed and flagged",
			roster: []string{"a"}, reported: vs{"a": fencing.B, "z": fencing.A},
			want: []fencemigrate.Input{rep("a", fencing.B), rep("z", fencing.A)}, extra: []string{"z"}},
		{name: "a known pod in neither is gone; one still reporting is not",
			roster: []string{"a"}, reported: vs{"a": fencing.A, "z": fencing.A}, known: vs{"a": fencing.A, "y": fencing.A, "z": fencing.A},
			want:  []fencemigrate.Input{rep("a", fencing.A), rep("z", fencing.A), fencemigrate.PodGone{Pod: "y"}},
			extra: []string{"z"}, gone: []string{"y"}},
		{name: "a known roster pod is never gone",
			roster: []string{"a"}, known: vs{"a": fencing.B},
			want: []fencemigrate.Input{rep("a", fencing.O)}, unreported: []string{"a"}},
		{name: "without a roster only the reports are fed, and nobody is gone",
			reported: vs{"a": fencing.A}, known: vs{"a": fencing.A, "b": fencing.O},
			want: []fencemigrate.Input{rep("a", fencing.A)}},
		{name: "nothing at all",
			want: nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := mergeRoster(c.roster, c.reported, c.known)
			require.Equal(t, c.want, f.Inputs)
			require.Equal(t, c.unreported, f.Unreported)
			require.Equal(t, c.extra, f.NotInRoster)
			require.Equal(t, c.gone, f.Gone)
		})
	}
}

// TestFencingRosterBlocksB: fed through the machine, a roster pod that never reported keeps B
// refused although every pod that reports runs A; the reports alone (the CLI before the
// roster) let B through.
func TestFencingRosterBlocksB(t *testing.T) {
	reported := vs{"a": fencing.A, "b": fencing.A}
	for _, c := range []struct {
		roster []string
		allow  bool
	}{{[]string{"a", "b", "legacy"}, false}, {nil, true}} {
		m := fencemigrate.New(fencemigrate.Config{LeaseTTL: 1000})
		ctx := &machine.Ctx{Trace: machine.Discard}
		m.On(ctx, fencemigrate.Advance{To: fencing.A})
		require.Equal(t, fencing.A, m.Allowed())
		for _, in := range mergeRoster(c.roster, reported, m.Snapshot().Pods).Inputs {
			m.On(ctx, in)
		}
		out := m.On(ctx, fencemigrate.Advance{To: fencing.B})
		if c.allow {
			require.Equal(t, fencing.B, m.Allowed(), "reports only: B is allowed (the bug the roster closes)")
			continue
		}
		require.Equal(t, fencing.A, m.Allowed(), "roster %v", c.roster)
		require.Len(t, out, 1)
		ref, ok := out[0].(fencemigrate.Refused)
		require.True(t, ok, "%T", out[0])
		require.Equal(t, fencemigrate.GateFleetOnA, ref.Gate)
		require.Contains(t, ref.Detail, "legacy=O")
	}
}

// TestFencingRosterNames: the roster's names are checked, naming the problem.
func TestFencingRosterNames(t *testing.T) {
	require.Empty(t, controller.CheckRoster([]string{"relay-0", "relay-1"}))
	for _, c := range []struct {
		pods []string
		want string
	}{
		{[]string{}, "lists no pod"},
		{[]string{"a", ""}, "name 1 is empty"},
		{[]string{"a", " "}, "name 1 is empty"},
		{[]string{"a", "b", "a"}, `"a" is listed twice (names 0 and 2)`},
		{[]string{"a,b"}, `"a,b" is not a pod name`},
	} {
		require.Contains(t, controller.CheckRoster(c.pods), c.want, "%q", c.pods)
	}
}

// TestConfigFencingPods: pods is read, and its mistakes are errors naming fencing[i].pods.
func TestConfigFencingPods(t *testing.T) {
	const table = "[[fencing]]\nname = \"s\"\naddrs = [\"x:1\"]\n"
	c, err := controller.ParseConfig("loam.toml", []byte(table+"pods = [\"relay-0\", \"relay-1\"]\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"relay-0", "relay-1"}, c.Fencing[0].Pods)
	c, err = controller.ParseConfig("loam.toml", []byte(table))
	require.NoError(t, err)
	require.Nil(t, c.Fencing[0].Pods, "no pods key: no roster")
	for _, bad := range []struct{ pods, want string }{
		{`[]`, "loam.toml: fencing[1].pods: lists no pod"},
		{`["a", ""]`, "loam.toml: fencing[1].pods: name 1 is empty"},
		{`["a", "b", "a"]`, `loam.toml: fencing[1].pods: "a" is listed twice`},
	} {
		_, err := controller.ParseConfig("loam.toml", []byte(table+"pods = [\"p\"]\n[[fencing]]\nname = \"t\"\naddrs = [\"x:1\"]\npods = "+bad.pods+"\n"))
		require.ErrorIs(t, err, controller.ErrConfig)
		require.ErrorContains(t, err, bad.want)
	}
}
