package valkey

import (
	"fmt"

	valkeygo "github.com/valkey-io/valkey-go"

	"loam.dev/router/kernel/fencing"
)

// The Lua scripts of the fenced session directory. Their meaning is kernel/fencing.Apply; the
// differential test holds them to it. Conventions:
//
//   - Every key is declared in KEYS, so the server checks slots (and a cluster client routes).
//   - Scripts that must never reach a cluster (O, A, B acquire and the backfill read keys of
//     several slots) start with "#!lua flags=no-cluster": run against a cluster by mistake,
//     they fail loudly instead of working until a reshard splits the slots.
//   - Scripts for C (and the single-key renew/release/validate) start with "#!lua", which makes
//     the server reject any undeclared cross-slot access.
//   - Acquire replies {1, generation} when granted, or {0, holder value, "old"|"new"} when a
//     live lease refuses it. A lease value is "<owner>:<generation>"; counters are decimal.
//   - Generations are Lua numbers: exact up to 2^53 (fencing.MaxGeneration).

// readCounter is the Lua helper every script that reads a counter inlines.
const readCounter = `
local function counter(key)
  local v = redis.call('GET', key)
  if not v then return 0 end
  local n = tonumber(v)
  if not n then return redis.error_reply('CORRUPT generation counter ' .. key .. ' holds ' .. v) end
  return n
end
`

// acquireO: KEYS old lease, old generation; ARGV owner, ttl ms.
const acquireO = `#!lua flags=no-cluster
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur, 'old'} end
local g = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. g, 'PX', ARGV[2])
return {1, g}
`

// acquireA: KEYS old lease, old generation, new lease, new generation; ARGV owner, ttl ms.
const acquireA = `#!lua flags=no-cluster
` + readCounter + `
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur, 'old'} end
cur = redis.call('GET', KEYS[3])
if cur then return {0, cur, 'new'} end
local o = counter(KEYS[2])
if type(o) == 'table' then return o end
local n = counter(KEYS[4])
if type(n) == 'table' then return n end
local g = math.max(o, n) + 1
redis.call('SET', KEYS[2], g)
redis.call('SET', KEYS[4], g)
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. g, 'PX', ARGV[2])
return {1, g}
`

// acquireB: like A, but the lease goes to the new key and only the new counter is written.
const acquireB = `#!lua flags=no-cluster
` + readCounter + `
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur, 'old'} end
cur = redis.call('GET', KEYS[3])
if cur then return {0, cur, 'new'} end
local o = counter(KEYS[2])
if type(o) == 'table' then return o end
local n = counter(KEYS[4])
if type(n) == 'table' then return n end
local g = math.max(o, n) + 1
redis.call('SET', KEYS[4], g)
redis.call('SET', KEYS[3], ARGV[1] .. ':' .. g, 'PX', ARGV[2])
return {1, g}
`

// acquireC: KEYS new lease, new generation (one slot); ARGV owner, ttl ms.
const acquireC = `#!lua
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur, 'new'} end
local g = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. g, 'PX', ARGV[2])
return {1, g}
`

// renew: KEYS lease; ARGV lease value, ttl ms. 1 if the caller's lease was live and extended.
const renew = `#!lua
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`

// release: KEYS lease; ARGV lease value. 1 if the caller's lease was live and is now gone.
const release = `#!lua
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`

// validate: KEYS lease; ARGV lease value. 1 if the caller's lease is live: the fence check.
const validate = `#!lua
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0
`

// backfill: KEYS old generation, new generation. Raises the new counter to the old one; 1 if
// it did. Idempotent.
const backfill = `#!lua flags=no-cluster
` + readCounter + `
local ov = redis.call('GET', KEYS[1])
if not ov then return 0 end
local o = counter(KEYS[1])
if type(o) == 'table' then return o end
local n = counter(KEYS[2])
if type(n) == 'table' then return n end
if n >= o then return 0 end
redis.call('SET', KEYS[2], ov)
return 1
`

// Scripts holds the loaded script objects; valkey-go's Lua sends EVALSHA and falls back to
// EVAL on NOSCRIPT on whichever node answered, which is the per-node cache fallback the seed
// requires (a failover, SCRIPT FLUSH, restart or slot move all empty a node's cache).
type scripts struct {
	acquire                            map[fencing.Version]*valkeygo.Lua
	renew, release, validate, backfill *valkeygo.Lua
}

var lua = scripts{
	acquire: map[fencing.Version]*valkeygo.Lua{
		fencing.O: valkeygo.NewLuaScript(acquireO),
		fencing.A: valkeygo.NewLuaScript(acquireA),
		fencing.B: valkeygo.NewLuaScript(acquireB),
		fencing.C: valkeygo.NewLuaScript(acquireC),
	},
	renew:    valkeygo.NewLuaScript(renew),
	release:  valkeygo.NewLuaScript(release),
	validate: valkeygo.NewLuaScript(validate),
	backfill: valkeygo.NewLuaScript(backfill),
}

// Script returns the Lua text of a version's acquire script, for review and for loading by
// other tools. Renew, release and validate are the same for every version.
func Script(v fencing.Version) (string, error) {
	switch v {
	case fencing.O:
		return acquireO, nil
	case fencing.A:
		return acquireA, nil
	case fencing.B:
		return acquireB, nil
	case fencing.C:
		return acquireC, nil
	}
	return "", fmt.Errorf("valkey: no acquire script for version %s", v)
}
