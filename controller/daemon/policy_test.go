package daemon

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/driver"
)

// TestStorePolicy: what each role may write, key space by key space; the audit log is
// append-only for both and stamped with the caller; a lease's TTL is capped.
func TestStorePolicy(t *testing.T) {
	allow := StorePolicy(time.Minute)
	ops := httpstore.Identity{Name: "ops", Role: httpstore.RoleOperator}
	ctl := httpstore.Identity{Name: "ctl", Role: httpstore.RoleController}
	lease := func(ttl time.Duration) []byte {
		return []byte(`{"holder":"x","ttl_ms":` + strconv.FormatInt(ttl.Milliseconds(), 10) + `}`)
	}
	entry := []byte(`{"event":"action","what":"map apply","holder":"cli:mallory"}`)
	for _, c := range []struct {
		name string
		id   httpstore.Identity
		a    httpstore.Access
		ok   bool
	}{
		{"operator reads a snapshot", ops, httpstore.Access{Op: "get", Key: "machine/configpush/default/app"}, true},
		{"operator lists everything", ops, httpstore.Access{Op: "list", Key: ""}, true},
		{"operator applies a map", ops, httpstore.Access{Op: "cas"}, true},
		{"operator requests a failover", ops, httpstore.Access{Op: "put", Key: "request/failover/default/app"}, true},
		{"operator decides a cutover", ops, httpstore.Access{Op: "put", Key: "request/cutover-decision/default/app", Expect: 3}, true},
		{"operator writes a snapshot", ops, httpstore.Access{Op: "put", Key: "machine/configpush/default/app", Expect: 4}, false},
		{"operator deletes a snapshot", ops, httpstore.Access{Op: "delete", Key: "machine/cutover/default/app", Expect: 4}, false},
		{"operator writes the lease", ops, httpstore.Access{Op: "put", Key: "lease/controller", Data: lease(time.Second)}, false},
		{"operator files a history", ops, httpstore.Access{Op: "put", Key: "history/cutover/default/app/1"}, false},
		{"operator writes elsewhere", ops, httpstore.Access{Op: "put", Key: "other/key"}, false},
		{"operator appends to the audit", ops, httpstore.Access{Op: "put", Key: "audit/0/1", Data: entry}, true},
		{"operator rewrites an audit entry", ops, httpstore.Access{Op: "put", Key: "audit/0/1", Expect: 7, Data: entry}, false},
		{"controller deletes an audit entry", ctl, httpstore.Access{Op: "delete", Key: "audit/0/1", Expect: 7}, false},
		{"audit entry that is not one", ctl, httpstore.Access{Op: "put", Key: "audit/0/1", Data: []byte(`"x"`)}, false},
		{"controller writes a snapshot", ctl, httpstore.Access{Op: "put", Key: "machine/configpush/default/app", Expect: 4}, true},
		{"controller takes the lease", ctl, httpstore.Access{Op: "put", Key: "lease/controller", Data: lease(10 * time.Second)}, true},
		{"controller writes a ten-year lease", ctl, httpstore.Access{Op: "put", Key: "lease/controller", Data: lease(10 * 365 * 24 * time.Hour)}, false},
		{"controller writes a lease of no TTL", ctl, httpstore.Access{Op: "put", Key: "lease/controller", Data: lease(0)}, false},
		{"controller writes garbage as the lease", ctl, httpstore.Access{Op: "put", Key: "lease/controller", Data: []byte("{")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := c.a
			err := allow(c.id, &a)
			if c.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
	a := httpstore.Access{Op: "put", Key: "audit/0/1", Data: entry}
	require.NoError(t, allow(ops, &a))
	var e driver.AuditEntry
	require.NoError(t, json.Unmarshal(a.Data, &e))
	require.Equal(t, "ops", e.Who, "the stored entry names the authenticated identity")
	require.Equal(t, "cli:mallory", e.Holder)
	forged := []byte(`{"event":"action","what":"x","who":"ctl"}`)
	a = httpstore.Access{Op: "put", Key: "audit/0/2", Data: forged}
	require.NoError(t, allow(ops, &a))
	require.NoError(t, json.Unmarshal(a.Data, &e))
	require.Equal(t, "ops", e.Who, "a client cannot choose who it was")
}
