package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

func appendTxn(id int64, key string) model.Txn {
	return model.Txn{ID: id, Ops: []model.Op{{Kind: model.OpAppend, Key: key, Value: id}}}
}

// TestStandbySync: the primary acknowledges a commit only once the standby has it; cut
// off from its standby (or after the promotion) it commits locally and acknowledges
// nothing, and every acknowledged write is on the promoted standby.
func TestStandbySync(t *testing.T) {
	s := detsim.New(detsim.Config{Seed: 1})
	p, sb := model.NewBackend(s, "primary", "app"), model.NewBackend(s, "standby", "app")
	st := model.Follow(s, p, sb, false, 0)
	_, _, err := p.Exec("app", 0, "c", appendTxn(1, "k"))
	require.NoError(t, err)
	require.Equal(t, []int64{1}, sb.Row("k"))

	s.Net.Cut(p.Node, sb.Node)
	_, _, err = p.Exec("app", 0, "c", appendTxn(2, "k"))
	require.ErrorIs(t, err, detsim.ErrIndeterminate, "no acknowledgement without the standby")
	require.Equal(t, []int64{1, 2}, p.Row("k"), "committed locally")
	require.Equal(t, []int64{1}, sb.Row("k"))

	s.Net.Mend(p.Node, sb.Node)
	_, _, err = p.Exec("app", 0, "c", appendTxn(3, "k"))
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, sb.Row("k"), "the standby catches up in order")

	st.Promote()
	require.True(t, st.Promoted())
	_, _, err = p.Exec("app", 0, "c", appendTxn(4, "k"))
	require.ErrorIs(t, err, detsim.ErrIndeterminate, "the old primary acknowledges nothing after the promotion")
	require.Equal(t, []int64{1, 2, 3}, sb.Row("k"))
	_, _, err = sb.Exec("app", 0, "c", appendTxn(5, "k"))
	require.NoError(t, err, "the promoted standby takes writes on its own")
}

// TestStandbyAsyncLoses: with the asynchronous mutant, a write acknowledged just before the
// promotion is not on the promoted standby.
func TestStandbyAsyncLoses(t *testing.T) {
	s := detsim.New(detsim.Config{Seed: 1})
	p, sb := model.NewBackend(s, "primary", "app"), model.NewBackend(s, "standby", "app")
	st := model.Follow(s, p, sb, true, 100)
	_, _, err := p.Exec("app", 0, "c", appendTxn(1, "k"))
	require.NoError(t, err)
	s.Run(200, 10)
	require.Equal(t, []int64{1}, sb.Row("k"), "shipped after the lag")
	_, _, err = p.Exec("app", 0, "c", appendTxn(2, "k"))
	require.NoError(t, err, "acknowledged at once")
	st.Promote()
	s.Run(400, 10)
	require.Equal(t, []int64{1}, sb.Row("k"), "the acknowledged write 2 is lost")
}
