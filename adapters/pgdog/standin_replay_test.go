package pgdog_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/configmap"
	"loam.dev/router/kernel/render"
)

// TestStandInReplaysTheRecordedSession sends the recorded session's commands, in the
// order recorded, to a stand-in started on files like the recording's (generation 4 moving
// to a target layout), and checks every reply against the exchange recorded at the same
// place: its shape (columns and types, tag, error, close), and the state it shows where the
// stand-in keeps one: which pools SHOW POOLS lists and which are paused (the generation
// marker after RELOAD, PAUSE across RELOAD), the task id COPY_DATA hands out.
func TestStandInReplaysTheRecordedSession(t *testing.T) {
	tr, err := recorded()
	require.NoError(t, err)
	sessions := map[string][]Exchange{} // one recorded session per Postgres major
	for _, e := range tr.Exchanges {
		sessions[e.postgres] = append(sessions[e.postgres], e)
	}
	for major, session := range sessions {
		t.Run("postgres-"+major, func(t *testing.T) { replaySession(t, session) })
	}
}

func replaySession(t *testing.T, session []Exchange) {
	dir := t.TempDir()
	s := startStandIn(t, dir)
	rec := resharding(record(4, "10.0.0.1", "10.0.0.2"), "10.1.0.1", "10.1.0.2")
	d, err := configmap.NewDir(dir)
	require.NoError(t, err)
	require.NoError(t, d.WriteFiles(context.Background(), 4, renderFiles(t, rec)))
	require.NoError(t, s.load())
	r := newRecorder(t, s.DSN())
	ctx := context.Background()

	replayed := 0
	for _, want := range session {
		switch want.Label {
		case "login wrong password":
			_, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://admin:wrong@%s/admin?sslmode=disable", s.ln.Addr()))
			got := errorExchange(t, want.Label, want.Command, err)
			require.Empty(t, diffShape(want, got), "%s", want.Label)
			continue
		case "extended protocol":
			conn, err := pgx.Connect(ctx, s.DSN())
			require.NoError(t, err)
			rows, err := conn.Query(ctx, "SHOW POOLS")
			if err == nil {
				rows.Close()
				err = rows.Err()
			}
			conn.Close(ctx)
			got := errorExchange(t, want.Label, want.Command, err)
			require.Empty(t, diffShape(want, got), "%s", want.Label)
			continue
		case "reload bad file":
			bad, err := render.NewFiles(render.File{Name: render.PgDogConfigFile, Data: []byte("[[databases]\n")}, render.File{Name: render.PgDogUsersFile, Data: renderFiles(t, rec)[1].Data})
			require.NoError(t, err)
			require.NoError(t, d.WriteFiles(ctx, 9, bad))
		}
		if want.Label == "show tasks" {
			// The tasks' progress is the real Postgres's: put the recorded states in,
			// oldest task first (finishing a cutover starts the next).
			// A replicating task is listed without its replication subtask until the
			// stream is set up; which the recording shows is put in too.
			streamed := false
			for _, row := range slices.Backward(want.Rows) {
				id := rowCell(want, row, "id")
				if id == nil {
					streamed = streamed || strings.HasPrefix(deref(rowCell(want, row, "type")), "replication ")
					continue
				}
				n, err := strconv.ParseInt(*id, 10, 64)
				require.NoError(t, err)
				s.SetTask(n, deref(rowCell(want, row, "status")), deref(rowCell(want, row, "inner_status")), nil)
				s.SetUnstreamed(n, !streamed)
				streamed = false
			}
		}
		got := r.do(want.Label, want.Command)
		require.Empty(t, diffShape(want, got), "exchange %d %q (%s)", replayed, want.Command, want.Label)
		switch want.Label {
		case "show pools":
			require.Equal(t, poolStates(want), poolStates(got), "SHOW POOLS after the same commands lists the same pools, paused alike")
		case "copy_data":
			require.Equal(t, *want.Rows[0][0], *got.Rows[0][0], "the same task id")
		case "show tasks":
			require.Equal(t, taskStates(want), taskStates(got), "SHOW TASKS after the same commands lists the same tasks")
		}
		replayed++
	}
	require.Greater(t, replayed, len(session)/2)
}

// poolStates is the sorted (database, user, paused) of each SHOW POOLS row.
func poolStates(e Exchange) []string {
	var out []string
	for _, row := range e.Rows {
		out = append(out, deref(rowCell(e, row, "database"))+"/"+deref(rowCell(e, row, "user"))+" paused="+deref(rowCell(e, row, "paused")))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// taskStates is the (id, scope) of each SHOW TASKS row (the status is the recording's,
// put in by the test).
func taskStates(e Exchange) []string {
	var out []string
	for _, row := range e.Rows {
		out = append(out, deref(rowCell(e, row, "id"))+" "+deref(rowCell(e, row, "scope")))
	}
	return out
}
