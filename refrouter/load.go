package refrouter

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"loam.dev/router/adapters"
)

// LoadOptions describe a write load through a fleet.
type LoadOptions struct {
	// Workers is the number of client goroutines; worker w writes through instance
	// w mod N (looked up again for every write, so a restarted instance is used).
	Workers int
	// Table receives one row per write: (id bigint primary key, worker int, seq bigint,
	// router text). id is the routing key: KeyBase + worker<<32 + seq.
	Table   string
	KeyBase int64
	// Pace is how long a worker waits between writes (0: back to back). After a failed
	// write a worker waits at least a millisecond, so a fenced instance is not spun on.
	Pace time.Duration
}

// Write is the outcome of one write of a load.
type Write struct {
	Worker  int
	Seq     int64
	Key     int64
	Router  string
	Start   time.Time
	Latency time.Duration
	Result  Result
	Err     error
}

// Acked reports whether the write was acknowledged: the statement returned no error, so
// its row must be durable on the shard Result names.
func (w Write) Acked() bool { return w.Err == nil }

// Fenced reports whether a backend fence refused the write (see Exec).
func (w Write) Fenced() bool { return errors.Is(w.Err, adapters.ErrFenced) }

// Load is a running write load.
type Load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	writes []Write
}

// StartLoad starts opts.Workers goroutines writing rows through the fleet until Stop or
// ctx ends.
func (f *Fleet) StartLoad(ctx context.Context, opts LoadOptions) *Load {
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{cancel: cancel}
	sql := "INSERT INTO " + pgx.Identifier{opts.Table}.Sanitize() + " (id, worker, seq, router) VALUES ($1, $2, $3, $4)"
	ids := f.IDs()
	for w := range opts.Workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			id := ids[w%len(ids)]
			for seq := int64(1); ctx.Err() == nil; seq++ {
				r := f.Router(id)
				key := opts.KeyBase + int64(w)<<32 + seq
				wr := Write{Worker: w, Seq: seq, Key: key, Router: id, Start: time.Now()}
				wr.Result, wr.Err = r.Exec(ctx, key, sql, key, w, seq, id)
				wr.Latency = time.Since(wr.Start)
				l.mu.Lock()
				l.writes = append(l.writes, wr)
				l.mu.Unlock()
				pace := opts.Pace
				if wr.Err != nil && pace < time.Millisecond {
					pace = time.Millisecond
				}
				if pace > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(pace):
					}
				}
			}
		}()
	}
	return l
}

// Writes returns the outcomes so far, in order of start time.
func (l *Load) Writes() []Write {
	l.mu.Lock()
	out := append([]Write(nil), l.writes...)
	l.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Stop ends the load (writes waiting on a pause give up with context.Canceled) and
// returns every outcome, in order of start time.
func (l *Load) Stop() []Write {
	l.cancel()
	l.wg.Wait()
	return l.Writes()
}

// Tally counts a load's outcomes: acknowledged, refused by a fence, failed otherwise.
func Tally(writes []Write) (acked, fenced, failed int) {
	for _, w := range writes {
		switch {
		case w.Acked():
			acked++
		case w.Fenced():
			fenced++
		default:
			failed++
		}
	}
	return
}
