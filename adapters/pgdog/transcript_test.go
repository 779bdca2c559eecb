package pgdog_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// What a real PgDog answered, kept. TestRealPgDogTranscript runs a script of admin commands
// against a real PgDog (LOAM_PGDOG_BIN) and checks each reply against
// testdata/transcript.json; with -record it rewrites that file instead. The stand-in
// (standin_test.go) takes every reply shape it sends from that file: the columns with their
// type OIDs, the command tag, the error's severity, SQLSTATE and message, whether PgDog
// closed the connection after it, and the lexical form of each column's values. A reply the
// stand-in builds that the transcript does not hold fails the test that received it.

var recordFlag = flag.Bool("record", false, "rewrite the transcript of the Postgres major the test runs on (testdata/transcript.json for 15, transcript-pg<major>.json otherwise) from a real PgDog (needs LOAM_PGDOG_BIN; see TestRealPgDogTranscript)")

const transcriptPath = "testdata/transcript.json"

// Transcript is one recorded session of admin commands.
type Transcript struct {
	// PgDogCommit is the commit of PgDog (github.com/pgdogdev/pgdog) that answered.
	PgDogCommit string `json:"pgdog_commit"`
	// PgDogVersion is its SHOW VERSION.
	PgDogVersion string `json:"pgdog_version"`
	// Postgres is the major version of the Postgres server PgDog's shards ran on ("" in
	// the first recording: 15). What COPY_DATA does depends on it (16+ for the replicating
	// path), so each major's recording is a file of its own: transcript.json for 15,
	// transcript-pg<major>.json for the others.
	Postgres  string     `json:"postgres,omitempty"`
	Note      []string   `json:"note"`
	Exchanges []Exchange `json:"exchanges"`
}

// postgresMajor is the major a transcript was recorded on.
func (tr *Transcript) postgresMajor() string {
	if tr.Postgres == "" {
		return "15"
	}
	return tr.Postgres
}

// transcriptFile is where a recording on Postgres major goes.
func transcriptFile(major string) string {
	if major == "15" {
		return transcriptPath
	}
	return filepath.Join(filepath.Dir(transcriptPath), "transcript-pg"+major+".json")
}

// Exchange is one command and PgDog's reply to it.
type Exchange struct {
	// Label names the kind of exchange; the stand-in looks replies up by it.
	Label string `json:"label"`
	// Command is the Query message sent; Args are its arguments as PgDog sees them
	// (lowercased), which Tag and Error.Message are compared with placeholders for.
	Command string      `json:"command"`
	Columns []Column    `json:"columns,omitempty"`
	Rows    [][]*string `json:"rows,omitempty"`
	Tag     string      `json:"tag,omitempty"`
	Error   *ErrorText  `json:"error,omitempty"`
	// Closed: PgDog closed the connection after the reply.
	Closed bool `json:"closed,omitempty"`
	// postgres is the major of the transcript it was read from.
	postgres string
}

// Column is one RowDescription field.
type Column struct {
	Name    string `json:"name"`
	TypeOID uint32 `json:"type_oid"`
	Size    int16  `json:"type_size"`
}

// ErrorText is an ErrorResponse.
type ErrorText struct {
	Severity string `json:"severity"`
	Code     string `json:"code"`
	Message  string `json:"message"`
}

// args are the command's arguments as PgDog parses them: lowercased, split on spaces, after
// the verb (one word, or two for SHOW and MAINTENANCE).
func args(command string) []string {
	w := strings.Fields(strings.ToLower(command))
	n := 1
	if len(w) > 1 && (w[0] == "show" || w[0] == "maintenance") {
		n = 2
	}
	if len(w) <= n {
		return nil
	}
	return w[n:]
}

// generic replaces the command's arguments in s with $1, $2, ... so that a reply naming
// its arguments compares equal across commands with other arguments.
func generic(s, command string) string {
	for i, a := range args(command) {
		if a != "" {
			s = strings.ReplaceAll(s, a, "$"+strconv.Itoa(i+1))
		}
	}
	return s
}

// valueForm is the lexical class of a cell: what a decoder could trip on.
func valueForm(v *string) string {
	if v == nil {
		return "null"
	}
	s := *v
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return "integer"
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return "decimal"
	}
	switch s {
	case "t", "f":
		return "bool t/f"
	case "true", "false":
		return "bool word"
	case "":
		return "empty"
	}
	return "text"
}

var (
	transcriptOnce sync.Once
	transcript     *Transcript
	transcriptErr  error
)

// recorded returns the transcripts in testdata (transcript*.json) as one: every file's
// exchanges, in the order of the file names, each file naming the PgDog commit that
// answered it.
func recorded() (*Transcript, error) {
	transcriptOnce.Do(func() {
		files, err := filepath.Glob(filepath.Join(filepath.Dir(transcriptPath), "transcript*.json"))
		if err == nil && len(files) == 0 {
			err = os.ErrNotExist
		}
		if err != nil {
			transcriptErr = fmt.Errorf("reading the recorded transcripts: %w (record them with LOAM_PGDOG_BIN=... go test ./adapters/pgdog -run TestRealPgDogTranscript -record)", err)
			return
		}
		slices.Sort(files)
		all := &Transcript{}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				transcriptErr = err
				return
			}
			var tr Transcript
			if err := json.Unmarshal(data, &tr); err != nil {
				transcriptErr = fmt.Errorf("%s: %w", f, err)
				return
			}
			if len(tr.PgDogCommit) != 40 {
				transcriptErr = fmt.Errorf("%s: pgdog_commit %q is not a commit: a transcript holds what a real PgDog answered, and names it", f, tr.PgDogCommit)
				return
			}
			if all.PgDogCommit == "" {
				all.PgDogCommit, all.PgDogVersion, all.Note = tr.PgDogCommit, tr.PgDogVersion, tr.Note
			}
			for _, e := range tr.Exchanges {
				e.postgres = tr.postgresMajor()
				all.Exchanges = append(all.Exchanges, e)
			}
		}
		transcript = all
	})
	return transcript, transcriptErr
}

// firstTask is the id a freshly started PgDog gave its first task: the recorded first
// COPY_DATA's (or RESHARD's) task_id.
func (tr *Transcript) firstTask() (int64, error) {
	for _, e := range tr.Exchanges {
		if (e.Label == "copy_data" || e.Label == "reshard") && len(e.Rows) == 1 && len(e.Columns) > 0 && e.Columns[0].Name == "task_id" && e.Rows[0][0] != nil {
			return strconv.ParseInt(*e.Rows[0][0], 10, 64)
		}
	}
	return 0, errors.New("the transcripts hold no COPY_DATA that started a task")
}

// byLabel returns the recorded exchanges of a label.
func (tr *Transcript) byLabel(label string) []Exchange {
	var out []Exchange
	for _, e := range tr.Exchanges {
		if e.Label == label {
			out = append(out, e)
		}
	}
	return out
}

// conform says why reply (to command, under label) is not one the transcript holds, or ""
// when it is: a recorded exchange of the label with the same columns (names, type OIDs,
// sizes), the same tag, error and close (arguments replaced by placeholders), and for each
// column a value form the recording shows for it (when it recorded rows with that column).
func (tr *Transcript) conform(label string, got Exchange) string {
	if why := tr.match(label, got, true); why != "" {
		return "the stand-in answered " + why
	}
	return ""
}

// conformShape is conform without the value forms: for a real PgDog's replies, whose rows
// vary from run to run (a task caught between two states shows an empty inner_status).
func (tr *Transcript) conformShape(label string, got Exchange) string {
	return tr.match(label, got, false)
}

func (tr *Transcript) match(label string, got Exchange, forms bool) string {
	recs := tr.byLabel(label)
	if len(recs) == 0 {
		return fmt.Sprintf("no recorded exchange is labelled %q", label)
	}
	var why []string
	for _, r := range recs {
		d := diffShape(r, got)
		if d == "" && forms {
			d = diffForms(recs, got)
		}
		if d == "" {
			return ""
		}
		why = append(why, fmt.Sprintf("recorded %q: %s", r.Command, d))
	}
	return fmt.Sprintf("%q (%s) with a reply no recording holds: %s", got.Command, label, strings.Join(why, "; "))
}

func diffShape(r, got Exchange) string {
	if !slices.Equal(r.Columns, got.Columns) {
		return fmt.Sprintf("columns %v, stand-in %v", r.Columns, got.Columns)
	}
	if rt, gt := generic(r.Tag, r.Command), generic(got.Tag, got.Command); rt != gt {
		return fmt.Sprintf("tag %q, stand-in %q", r.Tag, got.Tag)
	}
	switch {
	case (r.Error == nil) != (got.Error == nil):
		return fmt.Sprintf("error %+v, stand-in %+v", r.Error, got.Error)
	case r.Error != nil:
		re, ge := *r.Error, *got.Error
		re.Message, ge.Message = generic(re.Message, r.Command), generic(ge.Message, got.Command)
		if re != ge {
			return fmt.Sprintf("error %+v, stand-in %+v", *r.Error, *got.Error)
		}
	}
	if r.Closed != got.Closed {
		return fmt.Sprintf("connection closed %v, stand-in %v", r.Closed, got.Closed)
	}
	return ""
}

// diffForms checks each of got's cells against the forms recorded for its column under the
// same label.
func diffForms(recs []Exchange, got Exchange) string {
	forms := map[string]map[string]bool{}
	for _, r := range recs {
		for _, row := range r.Rows {
			for j, v := range row {
				if j < len(r.Columns) {
					c := r.Columns[j].Name
					if forms[c] == nil {
						forms[c] = map[string]bool{}
					}
					forms[c][valueForm(v)] = true
				}
			}
		}
	}
	for _, row := range got.Rows {
		for j, v := range row {
			c := got.Columns[j].Name
			if f := valueForm(v); forms[c] != nil && !forms[c][f] {
				return fmt.Sprintf("column %s: stand-in value %s is %s, recorded forms %v", c, show(v), f, keys(forms[c]))
			}
		}
	}
	return ""
}

func show(v *string) string {
	if v == nil {
		return "NULL"
	}
	return strconv.Quote(*v)
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// recorder sends admin commands over its own connection and keeps each reply as an
// Exchange.
type recorder struct {
	t     *testing.T
	dsn   string
	pc    *pgconn.PgConn
	trace []Exchange
}

func newRecorder(t *testing.T, dsn string) *recorder {
	r := &recorder{t: t, dsn: dsn}
	t.Cleanup(func() {
		if r.pc != nil {
			r.pc.Close(context.Background())
		}
	})
	return r
}

func (r *recorder) conn() *pgconn.PgConn {
	r.t.Helper()
	if r.pc == nil || r.pc.IsClosed() {
		pc, err := pgconn.Connect(context.Background(), r.dsn)
		require.NoError(r.t, err)
		r.pc = pc
	}
	return r.pc
}

// do sends command, records the reply under label and returns it.
func (r *recorder) do(label, command string) Exchange {
	r.t.Helper()
	ctx := context.Background()
	e := Exchange{Label: label, Command: command}
	mrr := r.conn().Exec(ctx, command)
	var err error
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		for _, fd := range rr.FieldDescriptions() {
			e.Columns = append(e.Columns, Column{Name: fd.Name, TypeOID: fd.DataTypeOID, Size: fd.DataTypeSize})
		}
		for rr.NextRow() {
			var row []*string
			for _, v := range rr.Values() {
				if v == nil {
					row = append(row, nil)
				} else {
					s := string(v)
					row = append(row, &s)
				}
			}
			e.Rows = append(e.Rows, row)
		}
		tag, rerr := rr.Close()
		if rerr != nil {
			err = rerr
			break
		}
		e.Tag = tag.String()
	}
	if cerr := mrr.Close(); err == nil {
		err = cerr
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		sev := pe.SeverityUnlocalized
		if sev == "" {
			sev = pe.Severity
		}
		e.Error = &ErrorText{Severity: sev, Code: pe.Code, Message: pe.Message}
		// Did PgDog close the connection? A probe on the same connection tells.
		if !r.pc.IsClosed() {
			if _, perr := r.pc.Exec(ctx, "SHOW VERSION").ReadAll(); perr != nil {
				e.Closed = true
			}
		} else {
			e.Closed = true
		}
	} else {
		require.NoError(r.t, err, "%s: %q", label, command)
	}
	r.trace = append(r.trace, e)
	return e
}

// add records an exchange made another way (a login, the extended protocol).
func (r *recorder) add(e Exchange) { r.trace = append(r.trace, e) }

// writeTranscript rewrites the transcript of tr's Postgres major.
func writeTranscript(t *testing.T, tr Transcript) {
	t.Helper()
	data, err := json.MarshalIndent(tr, "", "  ")
	require.NoError(t, err)
	path := transcriptFile(tr.postgresMajor())
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
}

func TestValueForm(t *testing.T) {
	s := func(v string) *string { return &v }
	for v, want := range map[*string]string{nil: "null", s("12"): "integer", s("-3"): "integer", s("1.5"): "decimal",
		s("t"): "bool t/f", s("false"): "bool word", s(""): "empty", s("running"): "text"} {
		require.Equal(t, want, valueForm(v), show(v))
	}
	require.Equal(t, "MAINTENANCE ON $1", generic("MAINTENANCE ON app", "MAINTENANCE ON App"))
	require.Equal(t, "CUTOVER", generic("CUTOVER", "CUTOVER"))
}

// TestConformRefusesWhatNoRecordingHolds: the check the stand-in runs on every reply.
func TestConformRefusesWhatNoRecordingHolds(t *testing.T) {
	one := func(v string) []*string { return []*string{&v} }
	tr := &Transcript{Exchanges: []Exchange{
		{Label: "pause", Command: "PAUSE app", Tag: "PAUSE"},
		{Label: "stop", Command: "STOP_TASK 9", Columns: []Column{{Name: "stop_task", TypeOID: 25, Size: -1}}, Rows: [][]*string{one("OK")}, Tag: "STOP_TASK"},
		{Label: "syntax", Command: "NOPE", Error: &ErrorText{Severity: "ERROR", Code: "08P01", Message: "syntax error in admin command"}},
	}}
	require.Empty(t, tr.conform("pause", Exchange{Command: "PAUSE other", Tag: "PAUSE"}))
	require.NotEmpty(t, tr.conform("pause", Exchange{Command: "PAUSE app", Tag: "PAUSE app"}), "tag")
	require.NotEmpty(t, tr.conform("resume", Exchange{Command: "RESUME", Tag: "RESUME"}), "no recording of the label")
	require.Empty(t, tr.conform("stop", Exchange{Command: "STOP_TASK 1", Columns: tr.Exchanges[1].Columns, Rows: [][]*string{one("done")}, Tag: "STOP_TASK"}))
	require.NotEmpty(t, tr.conform("stop", Exchange{Command: "STOP_TASK 1", Columns: tr.Exchanges[1].Columns, Rows: [][]*string{one("1")}, Tag: "STOP_TASK"}), "value form")
	require.NotEmpty(t, tr.conform("stop", Exchange{Command: "STOP_TASK 1", Columns: []Column{{Name: "stop_task", TypeOID: 20, Size: 8}}, Tag: "STOP_TASK"}), "column type")
	require.NotEmpty(t, tr.conform("syntax", Exchange{Command: "X", Error: &ErrorText{Severity: "FATAL", Code: "08P01", Message: "syntax error in admin command"}}), "severity")
	require.NotEmpty(t, tr.conform("syntax", Exchange{Command: "X", Error: &ErrorText{Severity: "ERROR", Code: "08P01", Message: "syntax error in admin command"}, Closed: true}), "close")
}
