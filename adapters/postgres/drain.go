package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"loam.dev/router/adapters"
)

// Defaults of AwaitSlotDrain (Options.DrainTimeout, Options.DrainPoll).
const (
	DefaultDrainTimeout = 30 * time.Second
	DefaultDrainPoll    = 5 * time.Millisecond
)

// ErrNoSlot: AwaitSlotDrain found no logical slot of the stream in the backend's database.
// A drain with nothing to wait for would pass without proving anything, so it fails.
var ErrNoSlot = errors.New("no logical replication slot of the stream in this database")

// ErrSlotNotDrained: a slot of the stream had not confirmed the WAL position AwaitSlotDrain
// waited for when its time ran out.
var ErrSlotNotDrained = errors.New("replication slot not drained")

var _ adapters.SlotDrainer = (*Backend)(nil)

// drainTargetQuery reads the position the drain waits for: pg_current_wal_insert_lsn(),
// which covers every commit already acknowledged, those made with synchronous_commit off
// too (their WAL may not be flushed yet; the WAL writer flushes it within wal_writer_delay,
// and a walsender sends only flushed WAL).
//
// The insert position of a WAL that ends exactly at a page boundary is just past the next
// page's header (XLogBytePosToRecPtr), while a walsender's position there is the boundary
// itself (the end of the last record, XLogBytePosToEndRecPtr), so a slot could not reach
// it until something else writes WAL. No record ends inside a page header, so the boundary
// stands for it: a position SizeOfXLogShortPHD (24) or SizeOfXLogLongPHD (40) bytes into a
// wal_block_size page is taken back to the page's start (Postgres 15/16,
// src/include/access/xlog_internal.h on 64-bit builds).
//
// A slot's confirmed position is always the end of a record (a walsender's keepalive
// carries the end of the last record it decoded; a subscriber confirms commits' ends), so
// it is at or past the boundary only if it is at or past any record that ends within the
// header's bytes too (one that began on the page before).
const drainTargetQuery = `SELECT l::text, (CASE WHEN (l - '0/0'::pg_lsn) % b IN (24, 40) THEN l - (l - '0/0'::pg_lsn) % b ELSE l END)::text
FROM (SELECT ` + drainPosition + ` AS l, current_setting('wal_block_size')::numeric AS b) AS s`

// drainPosition is the WAL position the drain waits for (a test swaps in literals through
// DrainTarget).
const drainPosition = "pg_current_wal_insert_lsn()"

// drainSlotsQuery lists the stream's logical slots in this database with how far each has
// confirmed and whether that reaches $1. starts_with, not LIKE: '_' is a LIKE wildcard.
const drainSlotsQuery = `SELECT slot_name::text, COALESCE(confirmed_flush_lsn::text, ''), COALESCE(confirmed_flush_lsn >= $1::pg_lsn, false)
FROM pg_replication_slots
WHERE slot_type = 'logical' AND database = current_database() AND (slot_name = $2 OR starts_with(slot_name, $2 || '_'))
ORDER BY slot_name`

// AwaitSlotDrain implements adapters.SlotDrainer: it reads pg_current_wal_insert_lsn()
// once, then every Options.DrainPoll checks that every logical slot of the stream named
// slot in the backend's database (pg_replication_slots.database = current_database())
// has confirmed_flush_lsn at or past it, for at most Options.DrainTimeout.
//
// The slots of the stream are those named slot or starting with slot+"_": a router names
// a stream's slots after the name the copy was given (PgDog 9918e963 <slot>_<i>, one per
// source shard, its reverse stream the same; the reference router <slot>_<i>_<j> and
// <slot>_r<n>_<i>_<j>; see cutover.SlotDrain). Filtering by database keeps out the slots of
// other shards on the same server. None at all is ErrNoSlot: the stream is not where the
// caller thinks, and nothing was waited for.
//
// What confirmed_flush_lsn means there, in PgDog 9918e963 (read, never copied):
// pgdog/src/backend/replication/logical/publisher/publisher_impl.rs confirms a
// transaction to its slot (a standby status update) only once the stream has committed it
// on every destination shard (subscriber/stream.rs, committed_lsn), and answers a
// keepalive outside a transaction with the keepalive's WAL end, so an idle stream's
// confirmed position reaches the end of the WAL (the fence's own ALTER ROLE included); a
// Postgres subscription's apply worker does the same (it reports its received position
// as flushed when no transaction is pending). Run after the shard is fenced, the wait
// therefore ends only once every transaction the application role committed there is on
// the other layout.
func (b *Backend) AwaitSlotDrain(ctx context.Context, slot string) error {
	const op = "AwaitSlotDrain"
	if slot == "" {
		return b.failf(op, "", "no slot name: give the name the copy was given (COPY_DATA's slot)")
	}
	ctx, cancel := context.WithTimeout(ctx, b.opt.DrainTimeout)
	defer cancel()
	var at, target string
	if err := b.pool.QueryRow(ctx, drainTargetQuery).Scan(&at, &target); err != nil {
		return b.fail(op, fmt.Errorf("reading pg_current_wal_insert_lsn(): %w", err))
	}
	start := time.Now()
	var last []string // the slots behind at the last poll that answered
	for {
		behind, n, err := b.slotsBehind(ctx, slot, target)
		switch {
		case err != nil && ctx.Err() == nil:
			return b.fail(op, fmt.Errorf("reading the confirmed positions of slot %q's slots: %w", slot, err))
		case err == nil && n == 0:
			return b.failf(op, "", "slot %q: %w (pg_replication_slots holds no logical slot named %q or %q in the database this backend connects to; check the shard's backend and the copy's slot name)",
				slot, ErrNoSlot, slot, slot+"_<n>")
		case err == nil && len(behind) == 0:
			return nil
		case err == nil:
			last = behind
		}
		if ctx.Err() == nil {
			t := time.NewTimer(b.opt.DrainPoll)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
			}
		}
		if last == nil {
			return b.fail(op, fmt.Errorf("reading the confirmed positions of slot %q's slots: %w", slot, cmp.Or(err, ctx.Err())))
		}
		return b.failf(op, "", "%w after %v: %s, short of %s, pg_current_wal_insert_lsn() when the wait began (the stream has not applied the shard's last transactions: a CUTOVER must not be sent yet; raise Options.DrainTimeout if the stream is only slow): %w",
			ErrSlotNotDrained, time.Since(start).Round(time.Millisecond), strings.Join(last, ", "), at, ctx.Err())
	}
}

// slotsBehind lists the stream's slots that have not confirmed target ("name at lsn") and
// how many slots the stream has.
func (b *Backend) slotsBehind(ctx context.Context, slot, target string) (behind []string, n int, err error) {
	rows, err := b.pool.Query(ctx, drainSlotsQuery, target, slot)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, confirmed string
		var done bool
		if err := rows.Scan(&name, &confirmed, &done); err != nil {
			return nil, 0, err
		}
		n++
		if !done {
			if confirmed == "" {
				confirmed = "none"
			}
			behind = append(behind, "slot "+name+" confirmed "+confirmed)
		}
	}
	return behind, n, rows.Err()
}
