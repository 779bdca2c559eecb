package pgdog_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/configmap"
	"loam.dev/router/kernel/render"
)

// EnvPgDogCommit names the PgDog commit the binary was built from; -record writes it into
// the transcript.
const EnvPgDogCommit = "LOAM_PGDOG_COMMIT"

// TestRealPgDogTranscript sends every admin command the adapter uses, on its success and
// error paths, to a real PgDog whose shards are real Postgres databases, through a
// resharding COPY_DATA, CUTOVER and STOP_TASK. With -record it writes what PgDog answered
// to testdata/transcript.json (the stand-in's script); without, it checks PgDog still
// answers so: every exchange conforms to the recording and every recorded label is seen.
//
//	LOAM_PGDOG_BIN=/path/to/pgdog LOAM_PGDOG_COMMIT=<commit> go test ./adapters/pgdog -run TestRealPgDogTranscript -record
func TestRealPgDogTranscript(t *testing.T) {
	srv := realServer(t)
	src := shards(t, srv, "tsrc", 2, true)
	dst := shards(t, srv, "tdst", 2, false)
	for i, d := range src {
		c := srv.Connect(t, d)
		for k := int64(0); k < 40; k++ {
			_, err := c.Exec(context.Background(), "INSERT INTO orders VALUES ($1, 'v') ON CONFLICT DO NOTHING", k*2+int64(i))
			require.NoError(t, err)
		}
		c.Close(context.Background())
	}
	rec := realResharding(srv, realRecord(srv, 4, src...), dst...)
	p, _ := startPgDog(t, rec)
	major := srv.QueryString(t, src[0], "SELECT current_setting('server_version_num')::int / 10000 || ''")
	r := newRecorder(t, p.AdminDSN(adminPassword))
	scrub := func(s string) string { return strings.ReplaceAll(s, p.Dir, "<dir>") }

	version := r.do("show version", "SHOW VERSION")
	r.do("show pools", "SHOW POOLS")
	r.do("show config", "SHOW CONFIG")
	r.do("show tasks", "SHOW TASKS")
	r.do("show replication_slots", "SHOW REPLICATION_SLOTS")
	r.do("show peers", "SHOW PEERS")
	r.do("reload", "RELOAD")
	r.do("pause db", "PAUSE app")
	r.do("show pools", "SHOW POOLS")
	r.do("resume db", "RESUME app")
	r.do("pause db", "PAUSE App")
	r.do("show pools", "SHOW POOLS")
	r.do("resume db", "RESUME app")
	r.do("pause all", "PAUSE")
	r.do("resume all", "RESUME")
	r.do("pause user db", "PAUSE app app") // Pause: the client user's pools only
	r.do("show pools", "SHOW POOLS")
	r.do("resume db", "RESUME app")
	r.do("maintenance on db", "MAINTENANCE ON app")
	r.do("maintenance off db", "MAINTENANCE OFF app")
	r.do("maintenance on all", "MAINTENANCE ON")
	r.do("maintenance off all", "MAINTENANCE OFF")
	r.do("syntax error", "FROBNICATE")
	r.do("syntax error", "PAUSE app app extra")
	r.do("cutover nothing", "CUTOVER")
	r.do("cutover unknown task", "CUTOVER 999")
	r.do("stop_task not found", "STOP_TASK 999")
	r.do("copy_data unknown database", "COPY_DATA nope "+render.ReshardDatabase("app", 4)+" loam_pub loam_slot_x")

	// The resharding walk: COPY_DATA, its task through to replicating, CUTOVER, the
	// reverse stream, STOP_TASK.
	dstDB := render.ReshardDatabase("app", 4)
	started := r.do("copy_data", "COPY_DATA app "+dstDB+" loam_pub loam_slot_4")
	require.Nil(t, started.Error, "COPY_DATA: %+v\n%s", started.Error, p.LogTail())
	task := cell(t, started, "task_id")
	seen := map[string]bool{}
	failed := ""
	deadline := time.Now().Add(2 * time.Minute)
	for {
		e := r.do("show tasks", "SHOW TASKS")
		state := taskState(e, task)
		if !seen[state] {
			seen[state] = true
			r.do("show replication_slots", "SHOW REPLICATION_SLOTS")
		} else {
			r.trace = r.trace[:len(r.trace)-1] // keep one listing per state
		}
		if strings.Contains(state, "replicating") && streamRunning(e) {
			break // the stream takes a CUTOVER once its subtask runs (see RootTasks)
		}
		if strings.HasPrefix(state, "failed") || strings.HasPrefix(state, "panicked") {
			// PgDog's schema sync calls pg_get_publication_tables(text[]), which exists
			// from Postgres 16 on: on an older server the task fails, and that is recorded.
			failed = state
			break
		}
		require.True(t, time.Now().Before(deadline), "task %s never replicating: states %v\n%s", task, seen, p.LogTail())
		time.Sleep(100 * time.Millisecond)
	}
	if failed != "" {
		t.Logf("COPY_DATA task %s: %s; CUTOVER and STOP_TASK of a replicating task not recorded", task, failed)
		r.do("cutover not replicating", "CUTOVER "+task)
		r.do("stop_task", "STOP_TASK "+task)
	} else {
		// CUTOVER only requests the cutover: the task swaps once caught up, then finishes.
		// One listing per state on the way, and a CUTOVER sent again while it runs.
		cut := r.do("cutover", "CUTOVER "+task)
		require.Nil(t, cut.Error, "CUTOVER %s: %+v\n%s", task, cut.Error, p.LogTail())
		seen = map[string]bool{}
		again := false
		for {
			e := r.do("show tasks", "SHOW TASKS")
			state := taskState(e, task)
			if seen[state] {
				r.trace = r.trace[:len(r.trace)-1]
			}
			seen[state] = true
			if strings.HasPrefix(state, "finished") {
				break
			}
			require.False(t, strings.HasPrefix(state, "failed") || strings.HasPrefix(state, "panicked") || state == "absent", "CUTOVER %s: task %s\n%s", task, state, p.LogTail())
			if !again {
				again = true
				if e := r.do("cutover in progress", "CUTOVER "+task); e.Error != nil {
					r.trace = r.trace[:len(r.trace)-1] // it finished in between: not this label's
				}
			}
			require.True(t, time.Now().Before(deadline.Add(2*time.Minute)), "CUTOVER %s never finished: states %v\n%s", task, seen, p.LogTail())
			time.Sleep(50 * time.Millisecond)
		}
		r.do("show pools", "SHOW POOLS")
		r.do("show replication_slots", "SHOW REPLICATION_SLOTS")
		r.do("cutover not replicating", "CUTOVER "+task)
		after := r.do("show tasks", "SHOW TASKS")
		var reverse string
		for _, row := range after.Rows {
			if v := rowCell(after, row, "id"); v != nil && *v != task && rowCell(after, row, "scope") != nil && *rowCell(after, row, "scope") == "root" {
				reverse = *v
			}
		}
		if reverse != "" {
			r.do("stop_task", "STOP_TASK "+reverse)
			r.do("show tasks", "SHOW TASKS")
		}
	}
	r.do("reshard unknown database", "RESHARD nope "+dstDB+" loam_pub")

	// RELOAD of files that do not load.
	d, err := configmap.NewDir(p.Dir)
	require.NoError(t, err)
	bad, err := render.NewFiles(render.File{Name: render.PgDogConfigFile, Data: []byte("[[databases]\n")}, render.File{Name: render.PgDogUsersFile, Data: renderFiles(t, rec)[1].Data})
	require.NoError(t, err)
	require.NoError(t, d.WriteFiles(context.Background(), 9, bad))
	r.do("reload bad file", "RELOAD")
	r.do("show version", "SHOW VERSION")

	// A login with the wrong password, and the extended protocol.
	_, err = pgconn.Connect(context.Background(), p.AdminDSN("wrong"))
	r.add(errorExchange(t, "login wrong password", "(startup as admin, wrong password)", err))
	conn, err := pgx.Connect(context.Background(), p.AdminDSN(adminPassword))
	require.NoError(t, err)
	rows, err := conn.Query(context.Background(), "SHOW POOLS")
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	conn.Close(context.Background())
	r.add(errorExchange(t, "extended protocol", "SHOW POOLS (extended protocol)", err))

	for i := range r.trace {
		e := &r.trace[i]
		for _, row := range e.Rows {
			for j, v := range row {
				if v != nil {
					s := scrub(*v)
					row[j] = &s
				}
			}
		}
	}
	if *recordFlag {
		commit := os.Getenv(EnvPgDogCommit)
		require.NotEmpty(t, commit, "-record needs %s: the PgDog commit the binary was built from", EnvPgDogCommit)
		pgMajor := major
		if pgMajor == "15" {
			pgMajor = "" // the first recording's file
		}
		writeTranscript(t, Transcript{
			PgDogCommit:  commit,
			PgDogVersion: *version.Rows[0][0],
			Postgres:     pgMajor,
			Note: []string{
				"What a real PgDog answered to the admin commands of adapters/pgdog (github.com/pgdogdev/pgdog, AGPL-3.0; run, never copied).",
				"Recorded by: LOAM_PGDOG_BIN=<pgdog> LOAM_PGDOG_COMMIT=<commit> go test ./adapters/pgdog -run TestRealPgDogTranscript -record",
				"The stand-in (standin_test.go) answers only with reply shapes held here.",
			},
			Exchanges: r.trace,
		})
		t.Logf("recorded %d exchanges into %s", len(r.trace), transcriptFile(major))
		return
	}
	tr, err := recorded()
	require.NoError(t, err)
	labels := map[string]bool{}
	for _, e := range r.trace {
		labels[e.Label] = true
		if why := tr.conformShape(e.Label, e); why != "" {
			t.Errorf("PgDog now answers otherwise than recorded (record again with -record if this is a new PgDog): %s", why)
		}
	}
	for _, e := range tr.Exchanges {
		if e.postgres == major { // what was recorded on this server's major is made again
			require.True(t, labels[e.Label], "recorded exchange %q (Postgres %s) was not made", e.Label, major)
		}
	}
}

// cell is the value of column col in the only row of e.
func cell(t *testing.T, e Exchange, col string) string {
	t.Helper()
	require.Len(t, e.Rows, 1, "%s: %+v", e.Command, e)
	v := rowCell(e, e.Rows[0], col)
	require.NotNil(t, v, "%s: no %s in %+v", e.Command, col, e)
	return *v
}

func rowCell(e Exchange, row []*string, col string) *string {
	for j, c := range e.Columns {
		if c.Name == col && j < len(row) {
			return row[j]
		}
	}
	return nil
}

// taskState is "status/inner_status" of the root task id in a SHOW TASKS exchange.
func taskState(e Exchange, id string) string {
	for _, row := range e.Rows {
		if v := rowCell(e, row, "id"); v != nil && *v == id {
			s, in := rowCell(e, row, "status"), rowCell(e, row, "inner_status")
			return fmt.Sprintf("%s/%s", deref(s), deref(in))
		}
	}
	return "absent"
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

func errorExchange(t *testing.T, label, command string, err error) Exchange {
	t.Helper()
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe), "%s: want a server error, got %v", label, err)
	sev := pe.SeverityUnlocalized
	if sev == "" {
		sev = pe.Severity
	}
	return Exchange{Label: label, Command: command, Error: &ErrorText{Severity: sev, Code: pe.Code, Message: pe.Message}, Closed: sev == "FATAL"}
}

// streamRunning reports whether a SHOW TASKS exchange lists a running replication subtask.
func streamRunning(e Exchange) bool {
	for _, row := range e.Rows {
		if typ, st := rowCell(e, row, "type"), rowCell(e, row, "status"); typ != nil && st != nil && strings.HasPrefix(*typ, "replication ") && *st == "running" {
			return true
		}
	}
	return false
}
