package vreshard_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/machinetest"
	"loam.dev/router/machine/vreshard"
)

// TestStartRefused: a Start the machine cannot run ends at once Refused, naming what is
// wrong, at the generation of the record it was given (0 without one), with nothing sent;
// Done() says so, and the refused machine's snapshot restores to one that says the same
// after a restart (make mutate: no semantic test started a bad reshard, so the refusals were
// checked by the golden scripts alone).
func TestStartRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*vreshard.Start)
		want string
	}{
		"no record":      {func(s *vreshard.Start) { s.Record = nil }, "no record"},
		"pgdog":          {func(s *vreshard.Start) { s.Record.Router.Kind = shardmap.PgDog }, "not routed by Vitess"},
		"no workflow":    {func(s *vreshard.Start) { s.Workflow = "" }, "name the workflow"},
		"workflow /":     {func(s *vreshard.Start) { s.Workflow = "a/b" }, "name the workflow"},
		"no cell":        {func(s *vreshard.Start) { s.Cell = "" }, "name the cell"},
		"other source":   {func(s *vreshard.Start) { s.Source = []string{"-80"} }, "the record's shards are 0 but the source is -80"},
		"target backend": {func(s *vreshard.Start) { delete(s.Backends, "80-") }, "no primary host:port given for target shard 80-"},
	} {
		t.Run(name, func(t *testing.T) {
			st := fixture()
			tc.edit(&st)
			var gen uint64
			if st.Record != nil {
				gen = st.Record.Generation
			}
			m := vreshard.New()
			out := m.On(&machine.Ctx{Now: 1000}, st)
			require.Len(t, out, 1, "%v", out)
			d, ok := out[0].(vreshard.Done)
			require.True(t, ok, "%v", out)
			require.Equal(t, vreshard.Refused, d.Outcome)
			require.Contains(t, d.Reason, tc.want)
			require.Equal(t, gen, d.Generation, "the refusal's generation")
			o, ended := m.Done()
			require.True(t, ended)
			require.Equal(t, vreshard.Refused, o)

			r := machinetest.RoundTrip(t, m, vreshard.Restore)
			require.Equal(t, []vreshard.Command{d}, r.On(&machine.Ctx{Now: 2000}, vreshard.Restarted{}), "after a restart")
		})
	}
}
