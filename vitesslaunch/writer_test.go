package vitesslaunch

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// refusing is a database/sql driver whose every statement fails: enough to run a Writer's
// load without a server.
type refusing struct{ execs *atomic.Int64 }

func (r refusing) Open(string) (driver.Conn, error) { return r, nil }
func (r refusing) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("refused")
}
func (refusing) Close() error              { return nil }
func (refusing) Begin() (driver.Tx, error) { return nil, io.EOF }
func (r refusing) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	r.execs.Add(1)
	return nil, errors.New("refused")
}

// TestWriterStops: Stop ends a load of several workers (the producer must see the stop even
// while the workers are busy), and an insert refused is counted, not acknowledged.
var refusedExecs atomic.Int64

func init() { sql.Register("vitesslaunch-refusing", refusing{&refusedExecs}) }

func TestWriterStops(t *testing.T) {
	n := &refusedExecs
	n.Store(0)
	db, err := sql.Open("vitesslaunch-refusing", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := NewWriter(db)
	w.Start(t.Context(), 4)
	for n.Load() < 2000 {
		time.Sleep(time.Millisecond)
	}
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("Stop did not end the load")
	}
	w.Stop() // again: nothing to do
	if w.Acked() != 0 || w.Refused() < 2000 {
		t.Fatalf("acked %d, refused %d; want 0 and at least 2000", w.Acked(), w.Refused())
	}
}
