package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/postgres"
	"loam.dev/router/conformance/pgtest"
)

// TestRealAwaitSlotDrain: the drain waits for every logical slot of the stream in the
// backend's database, by the name the copy was given (PgDog's <slot>_<i>, the reference
// router's <slot>_<i>_<j>), and for nothing else: a slot of the same stream in another
// shard's database on the same server, or one whose name only begins like it, does not
// hold it up. A stream with no slot there fails (ErrNoSlot), and a slot that does not
// reach the WAL position read when the wait began fails once DrainTimeout is up,
// naming the slot and the positions (ErrSlotNotDrained).
func TestRealAwaitSlotDrain(t *testing.T) {
	s := pgtest.Start(t, pgtest.WithSetting("wal_level", "logical"), pgtest.WithSetting("max_replication_slots", "10"))
	for _, db := range []string{"shard_0", "shard_1"} {
		s.CreateDatabase(t, db)
		s.Exec(t, db, "CREATE TABLE t (k int)")
	}
	slot := func(db, name string) {
		s.Exec(t, db, "SELECT pg_create_logical_replication_slot('"+name+"', 'test_decoding')")
	}
	write := func(db string) { s.Exec(t, db, "INSERT INTO t VALUES (1)") }
	advance := func(db, name string) {
		s.Exec(t, db, "SELECT pg_replication_slot_advance('"+name+"', pg_current_wal_flush_lsn())")
	}
	open := func(db string, timeout time.Duration) *postgres.Backend {
		b, err := postgres.Open(t.Context(), s.DSN(db), postgres.Options{DrainTimeout: timeout})
		require.NoError(t, err)
		t.Cleanup(b.Close)
		return b
	}
	b := open("shard_0", 300*time.Millisecond)

	// A position just past a page's header (short, or long at a segment's start) stands
	// for the page's start, where the last record ended and a walsender's position stays;
	// any other position is waited for as it is.
	for lsn, want := range map[string]string{"0/2018": "0/2000", "0/1000028": "0/1000000", "1/A0002028": "1/A0002000",
		"0/2030": "0/2030", "0/2017": "0/2017", "0/2000": "0/2000", "0/18": "0/0"} {
		got, err := postgres.DrainTarget(t.Context(), b, lsn)
		require.NoError(t, err)
		require.Equal(t, want, got, "drain target for %s", lsn)
	}

	err := b.AwaitSlotDrain(t.Context(), "loam_app_4")
	require.ErrorIs(t, err, postgres.ErrNoSlot)
	require.ErrorContains(t, err, `"loam_app_4"`)

	// Behind, in the other shard's database and under a longer name: not this stream here.
	slot("shard_1", "loam_app_4_1")
	slot("shard_0", "loam_app_40_0")
	write("shard_1")
	write("shard_0")
	require.ErrorIs(t, b.AwaitSlotDrain(t.Context(), "loam_app_4"), postgres.ErrNoSlot)

	// The stream's slots here: one as PgDog names it, one as the reference router does.
	slot("shard_0", "loam_app_4_0")
	slot("shard_0", "loam_app_4_0_1")
	write("shard_0")
	err = b.AwaitSlotDrain(t.Context(), "loam_app_4")
	require.ErrorIs(t, err, postgres.ErrSlotNotDrained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "slot loam_app_4_0 confirmed")
	require.ErrorContains(t, err, "slot loam_app_4_0_1 confirmed")
	t.Log(err)

	// One slot caught up, the other not: still not drained, and only the other is named.
	advance("shard_0", "loam_app_4_0")
	err = b.AwaitSlotDrain(t.Context(), "loam_app_4")
	require.ErrorIs(t, err, postgres.ErrSlotNotDrained)
	require.NotContains(t, err.Error(), "slot loam_app_4_0 confirmed")

	// The wait ends once the last one confirms, while it waits.
	b = open("shard_0", 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- b.AwaitSlotDrain(t.Context(), "loam_app_4") }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the drain ended before the slot confirmed: %v", err)
	default:
	}
	advance("shard_0", "loam_app_4_0")
	advance("shard_0", "loam_app_4_0_1")
	require.NoError(t, <-done)

	// The other shard's slot is still behind: its own drain says so.
	err = open("shard_1", 200*time.Millisecond).AwaitSlotDrain(t.Context(), "loam_app_4")
	require.ErrorIs(t, err, postgres.ErrSlotNotDrained)
	require.ErrorContains(t, err, "slot loam_app_4_1 confirmed")
}
