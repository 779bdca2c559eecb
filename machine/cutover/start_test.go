package cutover_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// TestStartRefusesAttemptMark: a shard named with '#' could be taken for another
// shard's retry in step ids ("fence/s1#2"), so Start refuses it before touching anything.
func TestStartRefusesAttemptMark(t *testing.T) {
	rec := fixture()
	rec.Target.Shards[1].Name = "n0#2"
	require.NoError(t, rec.Validate(), "the record itself is valid")
	cmds := cutover.New().On(&machine.Ctx{Now: 1, Trace: machine.Discard}, cutover.Start{Record: rec, Plan: cutover.Plan{
		Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub"}})
	require.Len(t, cmds, 1)
	done, ok := cmds[0].(cutover.Done)
	require.True(t, ok, "%v", cmds[0])
	require.Equal(t, cutover.Aborted, done.Outcome)
	require.Contains(t, done.Reason, `shard name "n0#2" contains '#'`)
	require.Equal(t, rec.Generation, done.Generation, "a refusal names the record's generation")
}

// TestStartRefusesNoRecord: a Start without a record is refused, not a crash, and the
// refused machine's snapshot restores.
func TestStartRefusesNoRecord(t *testing.T) {
	m := cutover.New()
	cmds := m.On(&machine.Ctx{Now: 1, Trace: machine.Discard}, cutover.Start{Plan: cutover.Plan{
		Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub"}})
	require.Len(t, cmds, 1)
	done, ok := cmds[0].(cutover.Done)
	require.True(t, ok, "%v", cmds[0])
	require.Equal(t, cutover.Aborted, done.Outcome)
	_, err := cutover.Restore(m.Snapshot())
	require.NoError(t, err)
}

// TestStartRefusesSharedServer: the fence is a role's, and a role belongs to the whole
// server, so a source and a destination shard on one server cannot be fenced apart; the
// cutover opens the destination at the publish while the source stays fenced. Start names
// both shards and the fix, and changes nothing.
func TestStartRefusesSharedServer(t *testing.T) {
	rec := fixture()
	rec.Target.Shards[2].Backend.Host = "10.0.1.2" // n2 on s1's server, another database
	rec.Target.Shards[2].Backend.Database = "app_n2"
	require.NoError(t, rec.Validate(), "the record itself is valid")
	cmds := cutover.New().On(&machine.Ctx{Now: 1, Trace: machine.Discard}, cutover.Start{Record: rec, Plan: cutover.Plan{
		Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub"}})
	require.Len(t, cmds, 1, "nothing but Done: no record written, no fence")
	done, ok := cmds[0].(cutover.Done)
	require.True(t, ok, "%v", cmds[0])
	require.Equal(t, cutover.Aborted, done.Outcome)
	require.Contains(t, done.Reason, "source shard s1 and destination shard n2 are on the same server 10.0.1.2:5432")
	require.Contains(t, done.Reason, "ALTER ROLE app NOLOGIN")
	require.Contains(t, done.Reason, "put the destination shards on other servers")

	// Host names compare without case; another port is another server.
	rec.Target.Shards[2].Backend.Host = "10.0.1.2"
	rec.Target.Shards[2].Backend.Port = 5433
	cmds = cutover.New().On(&machine.Ctx{Now: 1, Trace: machine.Discard}, cutover.Start{Record: rec, Plan: cutover.Plan{
		Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub"}})
	_, isDone := cmds[0].(cutover.Done)
	require.False(t, isDone, "a destination on another port of the same host is another server: %v", cmds[0])
	rec.Layout.Shards[0].Backend.Host = "DB-A"
	rec.Target.Shards[0].Backend.Host = "db-a"
	cmds = cutover.New().On(&machine.Ctx{Now: 1, Trace: machine.Discard}, cutover.Start{Record: rec, Plan: cutover.Plan{
		Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub"}})
	require.Len(t, cmds, 1)
	require.Contains(t, cmds[0].(cutover.Done).Reason, "source shard s0 and destination shard n0 are on the same server DB-A:5432")
}

// TestStartPublicationName: a publication name is lower-case letters, digits and '_' (PgDog
// lowercases admin commands), a to z and 0 to 9 included; anything else is refused.
func TestStartPublicationName(t *testing.T) {
	for pub, ok := range map[string]bool{"app_pub09": true, "pub_2019": true, "zone_0": true, "App": false, "app-pub": false, "app.pub": false, "app/pub": false, "": false} {
		cmds := cutover.New().On(&machine.Ctx{Now: 1, Trace: machine.Discard}, cutover.Start{Record: fixture(), Plan: cutover.Plan{
			Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: pub}})
		done, refused := cmds[0].(cutover.Done)
		require.Equal(t, !ok, refused && strings.Contains(done.Reason, "publication"), "publication %q: %v", pub, cmds[0])
	}
}

// TestStartSlotNameLength: PgDog names a slot per shard a stream reads from, slotName + "_<i>":
// the copy's on the source shards and the reverse stream's, which the forward CUTOVER starts,
// on the destination's, so the longest is the one of the larger side's last shard. Postgres
// refuses a slot name over 63 bytes: Start accepts one of exactly 63 and refuses one of 64,
// whichever side is larger, and counts the last shard's index (n-1), not n or n+1.
func TestStartSlotNameLength(t *testing.T) {
	be := func(host string) shardmap.Backend { return shardmap.Backend{Host: host, Port: 5432, Database: "app"} }
	record := func(name string, source, target int) *shardmap.Record {
		key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}
		var sb, tb []shardmap.Backend
		for i := range source {
			sb = append(sb, be(fmt.Sprintf("10.0.1.%d", i+1)))
		}
		for i := range target {
			tb = append(tb, be(fmt.Sprintf("10.0.2.%d", i+1)))
		}
		r := shardmap.NewPgHash(name, key, sb...)
		r.Version, r.Generation = 12, 4
		l := shardmap.NewPgHash(name, key, tb...).Layout
		for i := range l.Shards {
			l.Shards[i].Name = fmt.Sprintf("n%d", i)
		}
		r.Target = &l
		r.State = shardmap.State{Phase: shardmap.Resharding, To: 5}
		require.NoError(t, r.Validate())
		return r
	}
	for _, c := range []struct {
		source, target int
		slot           string // the longest slot's suffix: "_<generation>_<last shard>"
	}{
		{2, 4, "_4_3"},   // the destination larger: its last shard's reverse slot
		{4, 2, "_4_3"},   // the source larger: its last shard's copy slot
		{2, 10, "_4_9"},  // n-1 = 9, one digit (n+1 = 11 would be two)
		{2, 11, "_4_10"}, // the destination's 11th shard: two digits where the source's have one
		{11, 2, "_4_10"},
	} {
		for _, over := range []bool{false, true} {
			n := 63 - len("loam_") - len(c.slot)
			if over {
				n++
			}
			name := strings.Repeat("a", n)
			rec := record(name, c.source, c.target)
			cmds := cutover.New().On(&machine.Ctx{Now: 1, Trace: machine.Discard}, cutover.Start{Record: rec, Plan: cutover.Plan{
				Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub"}})
			done, refused := cmds[0].(cutover.Done)
			slot := "loam_" + name + c.slot
			require.Equal(t, over, refused, "%d source and %d destination shards, longest slot %s (%d bytes): %v", c.source, c.target, slot, len(slot), cmds[0])
			if over {
				require.Contains(t, done.Reason, "slot name "+slot+" ")
				require.Contains(t, done.Reason, "longer than 63 bytes")
			}
		}
	}
}
