package vitesslaunch

import (
	"context"
	"database/sql"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// WriterSchema and WriterVSchema make the table a Writer fills: t (id, v), sharded by the
// hash vindex on id.
const (
	WriterSchema  = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(64) NOT NULL)"
	WriterVSchema = `{"sharded": true, "vindexes": {"hash": {"type": "hash"}}, "tables": {"t": {"column_vindexes": [{"column": "id", "name": "hash"}]}}}`
)

// Writer inserts rows into table t through a vtgate session and remembers which were
// acknowledged and when: a reshard under its load must keep every acknowledged row, on the
// shard its key routes to. A refused insert is not acknowledged, and may or may not have
// happened (its answer lost in a switch).
type Writer struct {
	db      *sql.DB
	mu      sync.Mutex
	acked   map[int64]string
	times   []time.Time
	refused atomic.Int64
	next    int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

// NewWriter writes through db (a vtgate session on the keyspace).
func NewWriter(db *sql.DB) *Writer { return &Writer{db: db, acked: map[int64]string{}, next: 1} }

// value is what row id holds.
func value(id int64) string { return "v" + strconv.FormatInt(id*7919, 36) }

func (w *Writer) insert(ctx context.Context, id int64) error {
	ictx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v := value(id)
	if _, err := w.db.ExecContext(ictx, "INSERT INTO t (id, v) VALUES (?, ?)", id, v); err != nil {
		w.refused.Add(1)
		return err
	}
	w.mu.Lock()
	w.acked[id], w.times = v, append(w.times, time.Now())
	w.mu.Unlock()
	return nil
}

// Preload inserts n rows, stopping at the first refusal.
func (w *Writer) Preload(ctx context.Context, n int) error {
	for range n {
		if err := w.insert(ctx, w.next); err != nil {
			return fmt.Errorf("vitesslaunch: preloading row %d: %w", w.next, err)
		}
		w.next++
	}
	return nil
}

// Start inserts rows with workers goroutines, one after the other each, until Stop.
func (w *Writer) Start(ctx context.Context, workers int) {
	stop := make(chan struct{})
	w.mu.Lock()
	w.stop = stop
	w.mu.Unlock()
	ids := make(chan int64)
	w.wg.Add(1 + workers)
	go func() {
		defer w.wg.Done()
		defer close(ids)
		for id := w.next; ; id++ {
			select {
			case ids <- id:
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		go func() {
			defer w.wg.Done()
			for id := range ids {
				_ = w.insert(ctx, id)
			}
		}()
	}
}

// Stop ends the load started by Start and waits for the inserts in flight. It may be
// called more than once.
func (w *Writer) Stop() {
	w.mu.Lock()
	if w.stop != nil {
		close(w.stop)
		w.stop = nil
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// Acked is how many inserts were acknowledged, Refused how many were not.
func (w *Writer) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *Writer) Refused() int64 { return w.refused.Load() }

// LongestPause is the longest gap between two acknowledged inserts that overlaps
// [from-1s, to+1s]: the write pause a client saw around a switch.
func (w *Writer) LongestPause(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	times := slices.Clone(w.times)
	slices.SortFunc(times, time.Time.Compare)
	var pause time.Duration
	for i := 1; i < len(times); i++ {
		if times[i].After(from.Add(-time.Second)) && times[i-1].Before(to.Add(time.Second)) {
			pause = max(pause, times[i].Sub(times[i-1]))
		}
	}
	return pause
}

// ShardRows is what one shard's MySQL holds of the writer's table, against what it should.
type ShardRows struct {
	Shard string
	// Rows and Sum are the shard's row count and the sum of CRC32("<id>:<v>") over its rows;
	// WantRows and WantSum those of the acknowledged rows located on the shard.
	Rows, Sum, WantRows, WantSum uint64
	// Lost are acknowledged rows located on the shard that it does not hold; Misplaced are
	// acknowledged rows it holds that are located on another shard.
	Lost, Misplaced int
}

// Check reads every tablet's MySQL directly (bypassing Vitess) and compares it with the
// acknowledged rows, locate naming the shard each id belongs on (the record's Locate).
func (w *Writer) Check(ctx context.Context, tablets []*Tablet, locate func(id int64) (string, error)) ([]ShardRows, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	where := map[int64]string{}
	want := map[string]*ShardRows{}
	for _, tb := range tablets {
		want[tb.Shard] = &ShardRows{Shard: tb.Shard}
	}
	for id, v := range w.acked {
		sh, err := locate(id)
		if err != nil {
			return nil, err
		}
		where[id] = sh
		if r := want[sh]; r != nil {
			r.WantRows++
			r.WantSum += uint64(crc32.ChecksumIEEE([]byte(strconv.FormatInt(id, 10) + ":" + v)))
		}
	}
	var out []ShardRows
	for _, tb := range tablets {
		r := want[tb.Shard]
		db, err := sql.Open("mysql", tb.DSN(tb.DBName()))
		if err != nil {
			return nil, err
		}
		err = db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT(id, ':', v))), 0) FROM t").Scan(&r.Rows, &r.Sum)
		var present map[int64]bool
		if err == nil {
			present, err = ids(ctx, db)
		}
		db.Close()
		if err != nil {
			return nil, fmt.Errorf("vitesslaunch: tablet %s: %w", tb.Alias, err)
		}
		for id := range present {
			if sh, ok := where[id]; ok && sh != tb.Shard {
				r.Misplaced++
			}
		}
		for id, sh := range where {
			if sh == tb.Shard && !present[id] {
				r.Lost++
			}
		}
		out = append(out, *r)
	}
	return out, nil
}

// Holds reads which shard's MySQL holds each row of the writer's table.
func Holds(ctx context.Context, tablets []*Tablet) (map[int64]string, error) {
	held := map[int64]string{}
	for _, tb := range tablets {
		db, err := sql.Open("mysql", tb.DSN(tb.DBName()))
		if err != nil {
			return nil, err
		}
		got, err := ids(ctx, db)
		db.Close()
		if err != nil {
			return nil, fmt.Errorf("vitesslaunch: tablet %s: %w", tb.Alias, err)
		}
		for id := range got {
			held[id] = tb.Shard
		}
	}
	return held, nil
}

func ids(ctx context.Context, db *sql.DB) (map[int64]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT id FROM t")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}
