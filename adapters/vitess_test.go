package adapters_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/keyrange"
)

func TestParseTabletAlias(t *testing.T) {
	for s, want := range map[string]adapters.TabletAlias{
		"zone1-0000000100":      {Cell: "zone1", UID: 100},
		"zone1-100":             {Cell: "zone1", UID: 100},
		"us-east-1a-4294967295": {Cell: "us-east-1a", UID: 4294967295},
		"c.d_e-0":               {Cell: "c.d_e", UID: 0},
	} {
		got, err := adapters.ParseTabletAlias(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	require.Equal(t, "zone1-0000000100", adapters.TabletAlias{Cell: "zone1", UID: 100}.String())
	for _, bad := range []string{"", "zone1", "zone1-", "-100", "zone1-4294967296", "zone 1-100", "zone1-+1", "zone1-1x", "zone1/a-1"} {
		_, err := adapters.ParseTabletAlias(bad)
		require.Error(t, err, "%q", bad)
		require.ErrorContains(t, err, "adapters: tablet alias")
	}
}

// FuzzParseTabletAlias: the parser never panics, and an alias it accepts formats back to
// one that parses to the same alias (the text form is canonical up to the uid's padding).
func FuzzParseTabletAlias(f *testing.F) {
	for _, s := range []string{"zone1-0000000100", "a-b-1", "-1", "x-", "z-99999999999", "z-00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := adapters.ParseTabletAlias(s)
		if err != nil {
			return
		}
		b, err := adapters.ParseTabletAlias(a.String())
		require.NoError(t, err)
		require.Equal(t, a, b)
		require.True(t, strings.HasPrefix(s, a.Cell+"-"))
	})
}

// TestVitessError: the message names the RPC, keyspace, shard, tablet, code and fix; Is
// follows the gRPC code; the cause stays reachable.
func TestVitessError(t *testing.T) {
	e := &adapters.VitessError{Op: "TabletExternallyReparented", Addr: "127.0.0.1:15999", Keyspace: "customer", Shard: "-80",
		Tablet: "zone1-0000000101", Code: "Unavailable", Fix: "check that vtctld runs", Err: errors.New("connection refused")}
	require.Equal(t, "vtctld 127.0.0.1:15999 TabletExternallyReparented keyspace=customer shard=-80 tablet=zone1-0000000101 [Unavailable]: connection refused (check that vtctld runs)", e.Error())
	require.ErrorIs(t, e, adapters.ErrUnreachable)
	require.NotErrorIs(t, e, adapters.ErrNotFound)
	e.Code = "DeadlineExceeded"
	require.ErrorIs(t, e, adapters.ErrUnreachable)
	e.Code = "NotFound"
	require.ErrorIs(t, e, adapters.ErrNotFound)
	require.NotErrorIs(t, e, adapters.ErrUnreachable)
	e.Code, e.Err = "", adapters.ErrWrongShard
	require.ErrorIs(t, e, adapters.ErrWrongShard)
	require.NotErrorIs(t, e, adapters.ErrUnreachable)
}

func TestServing(t *testing.T) {
	primary := []adapters.SrvShard{{Name: "-80", Range: keyrange.MustParse("-80")}, {Name: "80-", Range: keyrange.MustParse("80-")}}
	parts := []adapters.SrvPartition{{Type: adapters.TabletReplica, Shards: primary[:1]}, {Type: adapters.TabletPrimary, Shards: primary}}
	require.Equal(t, primary, adapters.Serving(parts, adapters.TabletPrimary))
	require.Nil(t, adapters.Serving(parts, adapters.TabletRdonly))
	require.Equal(t, "RDONLY", adapters.TabletRdonly.String())
	require.Equal(t, "TabletType(7)", adapters.TabletType(7).String())
}
