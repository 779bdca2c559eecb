package configpush_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// pushScript is every input of a push of generation 4 to n instances where everything
// succeeds at once: the Push, FilesWritten, then Reloaded and Observed per instance.
func pushScript(n int) []configpush.Input {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("pgdog-%d", i)
	}
	rec := &shardmap.Record{Version: 7, Generation: 4, Router: shardmap.Router{Kind: shardmap.PgDog, Name: "app"}}
	in := []configpush.Input{
		configpush.Push{Record: rec, Generation: 4, Files: filesFor(4), Instances: ids},
		configpush.FilesWritten{Step: "g4/files", Attempt: 1},
	}
	for _, id := range ids {
		in = append(in, configpush.Reloaded{Step: "g4/reload/" + id, Attempt: 1, Instance: id})
	}
	for _, id := range ids {
		in = append(in, configpush.Observed{Step: "g4/observe/" + id, Attempt: 1, Instance: id, Generation: 4, Known: true})
	}
	return in
}

// runPush feeds the script and returns every command issued.
func runPush(t testing.TB, n int) []configpush.Command {
	m := configpush.New(configpush.Options{})
	ctx := &machine.Ctx{Now: 1000, Rand: rand.New(rand.NewChaCha8([32]byte{})), Trace: machine.Discard}
	var all []configpush.Command
	for _, in := range pushScript(n) {
		all = append(all, m.On(ctx, in)...)
	}
	s := m.Snapshot()
	require.True(t, s.Push.Done, "the push did not finish")
	return all
}

// TestPushCommandsLinear: a push to N instances issues exactly 5N+4 commands — WriteFiles,
// its SetTimer and CancelTimer, and the Outcome, plus per instance Reload, Observe, two
// SetTimers (the second replaces the first) and a CancelTimer — for N = 10, 100 and 1,000.
func TestPushCommandsLinear(t *testing.T) {
	for _, n := range []int{10, 100, 1000} {
		cmds := runPush(t, n)
		require.Len(t, cmds, 5*n+4, "N=%d", n)
		kinds := map[string]int{}
		for _, c := range cmds {
			kinds[fmt.Sprintf("%T", c)]++
		}
		require.Equal(t, map[string]int{
			"configpush.WriteFiles": 1, "configpush.Outcome": 1,
			"configpush.Reload": n, "configpush.Observe": n,
			"configpush.SetTimer": 2*n + 1, "configpush.CancelTimer": n + 1,
		}, kinds, "N=%d", n)
	}
}

// BenchmarkPushCommands reports the commands a push to N instances issues (cmds, and
// cmds/instance, which stays at 5 plus 4/N: linear).
func BenchmarkPushCommands(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var cmds int
			for b.Loop() {
				cmds = len(runPush(b, n))
			}
			b.ReportMetric(float64(cmds), "cmds")
			b.ReportMetric(float64(cmds)/float64(n), "cmds/instance")
		})
	}
}

// BenchmarkOn measures one On step, averaged over every step of a push to N instances (the
// Push, FilesWritten, and a Reloaded and an Observed per instance). The machine is rebuilt,
// off the clock, each time the script wraps.
func BenchmarkOn(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			script := pushScript(n)
			ctx := &machine.Ctx{Now: 1000, Rand: rand.New(rand.NewChaCha8([32]byte{})), Trace: machine.Discard}
			m := configpush.New(configpush.Options{})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == len(script) {
					b.StopTimer()
					m, i = configpush.New(configpush.Options{}), 0
					b.StartTimer()
				}
				m.On(ctx, script[i])
				i++
			}
		})
	}
}
