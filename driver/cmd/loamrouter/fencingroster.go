package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"loam.dev/router/controller"
	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine/fencemigrate"
)

// The fleet's roster is the deployment's pod names, from the deploy system ([[fencing]]
// pods in loam.toml, or --pods from a script that reads the deployment). It cannot come from
// the pods' own reports: pods still on the legacy O scripts never report, and a pod whose
// report was lost is not known either, so "every pod reports A" would hold while a pod runs
// O, the machine would allow B, and an O pod and a B pod would grant the same session (the
// simulator found that: detsim scenario fencing, mutant fencing-roster-from-reports).

// ErrNoRoster is returned by the fencing commands that move the migration when no roster
// was given.
var ErrNoRoster = errors.New("loamrouter: no roster of the fleet's pods")

// rosterFix is what an operator does about a missing roster.
const rosterFix = "set fencing.pods in loam.toml or --pods"

// rosterFeed is what one fencing command feeds the machine about the fleet, and what
// `fencing status` says about it.
type rosterFeed struct {
	Inputs []fencemigrate.Input
	// Unreported are roster pods with no report, fed as O: they may run the legacy scripts.
	Unreported []string
	// NotInRoster are reporting pods the roster does not list: fed all the same (a pod that
	// reports exists and runs what it reports), and warned about.
	NotInRoster []string
	// Gone are pods the machine knew that are neither in the roster nor reporting.
	Gone []string
}

// mergeRoster decides what to feed the machine from the roster (nil: none given), the
// pods' reports and the pods the machine already knows. Every roster pod is fed, at its
// reported version or O; every reporting pod is fed; PodGone only for a known pod that is
// in neither. Without a roster only the reports are fed and no pod is declared gone: the
// command cannot tell a pod that left from one that never reported.
func mergeRoster(roster []string, reported, known map[string]fencing.Version) rosterFeed {
	var f rosterFeed
	in := map[string]bool{}
	for _, p := range roster {
		in[p] = true
	}
	all := slices.Sorted(maps.Keys(reported))
	for _, p := range roster {
		if _, ok := reported[p]; !ok {
			all = append(all, p)
		}
	}
	slices.Sort(all)
	for _, p := range all {
		v, ok := reported[p]
		switch {
		case !ok:
			f.Unreported = append(f.Unreported, p)
			v = fencing.O
		case roster != nil && !in[p]:
			f.NotInRoster = append(f.NotInRoster, p)
		}
		f.Inputs = append(f.Inputs, fencemigrate.PodReported{Pod: p, Version: v})
	}
	if roster == nil {
		return f
	}
	for _, p := range slices.Sorted(maps.Keys(known)) {
		if _, ok := reported[p]; !ok && !in[p] {
			f.Gone = append(f.Gone, p)
			f.Inputs = append(f.Inputs, fencemigrate.PodGone{Pod: p})
		}
	}
	return f
}

// fencingRoster returns the roster of directory fc: --pods when given, else its pods key;
// nil when neither is given. from says where it came from, for `fencing status`.
func fencingRoster(cmd *cobra.Command, fc *controller.FencingConfig) (pods []string, from string, err error) {
	if f := cmd.Flags().Lookup("pods"); f != nil && f.Changed {
		raw, _ := cmd.Flags().GetStringSlice("pods")
		for _, p := range raw {
			pods = append(pods, strings.TrimSpace(p))
		}
		if msg := controller.CheckRoster(pods); msg != "" {
			return nil, "", fmt.Errorf("--pods: %s", strings.Replace(msg, `pods = ["relay-0", "relay-1"]`, "--pods relay-0,relay-1", 1))
		}
		return pods, "--pods", nil
	}
	if fc.Pods != nil {
		return fc.Pods, "fencing.pods in loam.toml", nil
	}
	return nil, "", nil
}

// needRoster refuses a command that moves the migration without a roster.
func needRoster(name, command string, roster []string) error {
	if roster != nil {
		return nil
	}
	return fmt.Errorf("fencing %s %s: %w: %s (the deployment's pod names, e.g. from kubectl get pods): pods on the legacy O scripts never report, so without the roster the fleet could be allowed B while one still runs O",
		command, name, ErrNoRoster, rosterFix)
}
