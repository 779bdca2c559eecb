package simtest_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim/simtest"
)

func TestParseEntry(t *testing.T) {
	e, err := simtest.ParseEntry("cutover-42.seed", []byte("# found the fence skipped\n# second line\nscenario cutover\nseed 42\nschedule ops=1;faults=\n"))
	require.NoError(t, err)
	require.Equal(t, simtest.Entry{File: "cutover-42.seed", Scenario: "cutover", Seed: 42, Schedule: "ops=1;faults=", Why: "found the fence skipped second line"}, e)
	for _, bad := range []string{
		"scenario cutover\nseed 42\n",            // no why
		"# why\nseed 42\n",                       // no scenario
		"# why\nscenario x\nseed -1\n",           // bad seed
		"# why\nscenario x\nseed 1\nseed 2\n",    // twice
		"# why\nscenario x\nseed 1\nflavour 2\n", // unknown key
		"# why\nscenario\nseed 1\n",              // empty name
	} {
		_, err := simtest.ParseEntry("x.seed", []byte(bad))
		require.ErrorIs(t, err, simtest.ErrBadCorpus, "%q", bad)
	}
}

func FuzzParseEntry(f *testing.F) {
	f.Add([]byte("# why\nscenario cutover\nseed 42\n"))
	f.Add([]byte("# a\nscenario s\nseed 1\nschedule ops=*;faults=net.drop#1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := simtest.ParseEntry("f.seed", data)
		if err != nil {
			require.ErrorIs(t, err, simtest.ErrBadCorpus)
			return
		}
		require.NotEmpty(t, e.Scenario)
		require.NotEmpty(t, e.Why)
	})
}

// TestEveryDetsimTestImportsSimtest: `go test ./detsim/... -seed=N` passes -seed to every
// test binary under detsim/, and a binary that does not define the flag fails; importing
// simtest defines it.
func TestEveryDetsimTestImportsSimtest(t *testing.T) {
	root, err := simtest.RepoRoot()
	require.NoError(t, err)
	dirs := map[string]bool{}
	imports := map[string]bool{}
	err = filepath.WalkDir(filepath.Join(root, "detsim"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		dir := filepath.Dir(p)
		dirs[dir] = true
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			if im.Path.Value == `"loam.dev/router/detsim/simtest"` {
				imports[dir] = true
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for dir := range dirs {
		require.True(t, imports[dir], "%s: a test file must import loam.dev/router/detsim/simtest (the -seed flag)", dir)
	}
}
