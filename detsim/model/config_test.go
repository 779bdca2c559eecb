package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

func sampleRecord() *shardmap.Record {
	r := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "shard-0", Port: 5432, Database: "app"},
		shardmap.Backend{Host: "shard-1", Port: 5432, Database: "app"})
	r.Generation = 3
	return r
}

func TestRenderParseRoundTrip(t *testing.T) {
	r := sampleRecord()
	tgt := r.Layout.Clone()
	tgt.Shards[0].Backend.Host = "shard-2"
	r.Target = &tgt
	c, err := model.ParseConfig(model.Render(r, true))
	require.NoError(t, err)
	require.Equal(t, model.Config{Generation: 3, TwoPC: true, Databases: map[string][]string{
		"app": {"shard-0", "shard-1"}, "app__reshard_3": {"shard-2", "shard-1"},
	}}, c)
}

func TestParseConfigRejects(t *testing.T) {
	for _, bad := range []string{"", "database app a\n", "generation 0\n", "generation 1\ngeneration 2\n",
		"generation 1\ndatabase app\n", "generation 1\nfrobnicate\n", "generation 1\n\n", "generation x\n",
		"generation 1\ndatabase a x\ndatabase a y\n", "generation 1\ntwo_phase_commit off\n"} {
		_, err := model.ParseConfig(render.Files{{Name: model.ConfigFile, Data: []byte(bad)}})
		require.ErrorIs(t, err, model.ErrBadConfig, "%q", bad)
	}
	_, err := model.ParseConfig(nil)
	require.ErrorIs(t, err, model.ErrBadConfig)
}

// FuzzParseConfig: whatever the bytes, ParseConfig refuses with ErrBadConfig or returns a
// config with a positive generation and no empty database.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("generation 3\ndatabase app shard-0 shard-1\ntwo_phase_commit on\n"))
	f.Add([]byte("generation 1\ndatabase app__reshard_1 a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := model.ParseConfig(render.Files{{Name: model.ConfigFile, Data: data}})
		if err != nil {
			require.ErrorIs(t, err, model.ErrBadConfig)
			return
		}
		require.Positive(t, c.Generation)
		for db, bs := range c.Databases {
			require.NotEmpty(t, db)
			require.NotEmpty(t, bs)
		}
	})
}

func TestRouteSpreads(t *testing.T) {
	seen := map[int]int{}
	for i := range 1000 {
		seen[model.Route("k"+string(rune('a'+i%26))+string(rune('a'+i/26)), 4)]++
	}
	require.Len(t, seen, 4)
	for s, n := range seen {
		require.Greater(t, n, 150, "shard %d got %d of 1000 keys", s, n)
	}
}
