package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/kernel/vindex"
)

// Location is where a key routes, and why.
type Location struct {
	Key    string `json:"key"`
	Column string `json:"column"`
	Type   string `json:"type"`
	Scheme string `json:"scheme"`
	// Hash is the Postgres row hash (pg_hash) in hex; Modulus and Remainder its routing.
	Hash      string `json:"hash,omitempty"`
	Modulus   uint64 `json:"modulus,omitempty"`
	Remainder uint64 `json:"remainder,omitempty"`
	// KeyspaceID is the Vitess keyspace id (vindex) in hex, and Range the shard's range.
	KeyspaceID string `json:"keyspace_id,omitempty"`
	Range      string `json:"range,omitempty"`
	// Rule describes the range or list rule that holds the key (pg_range, pg_list), or
	// "default".
	Rule    string `json:"rule,omitempty"`
	Index   int    `json:"shard_index"`
	Shard   string `json:"shard"`
	Backend string `json:"backend"`
	Fence   string `json:"fence"`
}

// locate routes text under layout, exactly as the routers do: PgDog's postgres hasher is
// Postgres hash partitioning modulo the shard count (kernel/pghash); Vitess's vindexes map
// the value to a keyspace id whose range names the shard (kernel/vindex, kernel/keyrange).
func locate(l shardmap.Layout, text string) (Location, error) {
	k := l.Scheme.ShardKey()
	loc := Location{Key: text, Column: k.Column, Type: k.Type.String(), Index: -1}
	var idx int
	switch s := l.Scheme.(type) {
	case shardmap.PgHash:
		loc.Scheme = "pg_hash"
		t, err := pgType(k.Type)
		if err != nil {
			return loc, err
		}
		row, err := pghash.ParseKey(t, text)
		if err != nil {
			return loc, fmt.Errorf("key %q is not a %s: %w", text, t, err)
		}
		loc.Hash = fmt.Sprintf("%016x", row.Hash())
		loc.Modulus = uint64(s.Shards)
		loc.Remainder = row.Remainder(loc.Modulus)
		idx = int(loc.Remainder)
	case shardmap.PgRange:
		loc.Scheme = "pg_range"
		v, err := value(k.Type, text)
		if err != nil {
			return loc, err
		}
		idx = -1
		for i, r := range s.Ranges {
			if (r.Start == nil || v.Compare(*r.Start) >= 0) && (r.End == nil || v.Compare(*r.End) < 0) {
				idx, loc.Rule = int(r.Shard), fmt.Sprintf("ranges[%d]: [%s, %s)", i, bound(r.Start, "-inf"), bound(r.End, "+inf"))
				break
			}
		}
		if idx < 0 && s.Default != nil {
			idx, loc.Rule = int(*s.Default), "default"
		}
	case shardmap.PgList:
		loc.Scheme = "pg_list"
		v, err := value(k.Type, text)
		if err != nil {
			return loc, err
		}
		idx = -1
		for i, r := range s.Lists {
			for _, lv := range r.Values {
				if v.Compare(lv) == 0 && idx < 0 {
					idx, loc.Rule = int(r.Shard), fmt.Sprintf("lists[%d] holds %s", i, lv)
				}
			}
		}
		if idx < 0 && s.Default != nil {
			idx, loc.Rule = int(*s.Default), "default"
		}
	case shardmap.Vindex:
		loc.Scheme = "vindex " + s.Kind.String()
		ksid, err := keyspaceID(s.Kind, k.Type, text)
		if err != nil {
			return loc, err
		}
		loc.KeyspaceID = hex.EncodeToString(ksid[:])
		idx = -1
		for i, r := range s.Ranges {
			if r.ContainsKeyspaceID(ksid) {
				idx, loc.Range = i, r.String()
				break
			}
		}
	default:
		return loc, fmt.Errorf("scheme %T is not routable here", l.Scheme)
	}
	if idx < 0 || idx >= len(l.Shards) {
		return loc, fmt.Errorf("key %q routes to no shard (%s): no rule holds it and there is no default", text, loc.Scheme)
	}
	sh := l.Shards[idx]
	loc.Index, loc.Shard = idx, sh.Name
	loc.Backend = fmt.Sprintf("%s:%d/%s", sh.Backend.Host, sh.Backend.Port, sh.Backend.Database)
	loc.Fence = sh.Fence.String()
	return loc, nil
}

func pgType(t shardmap.KeyType) (pghash.Type, error) {
	switch t {
	case shardmap.Bigint:
		return pghash.TypeInt8, nil
	case shardmap.Integer:
		return pghash.TypeInt4, nil
	case shardmap.Text:
		return pghash.TypeText, nil
	case shardmap.UUID:
		return pghash.TypeUUID, nil
	}
	return 0, fmt.Errorf("key type %v has no Postgres hash here", t)
}

// value reads a key as a range or list rule holds values: integers for integer keys,
// text (UUIDs in canonical form) otherwise.
func value(t shardmap.KeyType, text string) (shardmap.Value, error) {
	switch t {
	case shardmap.Bigint, shardmap.Integer:
		v, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return shardmap.Value{}, fmt.Errorf("key %q is not an integer", text)
		}
		return shardmap.Int(v), nil
	case shardmap.UUID:
		u, err := pghash.ParseUUID(text)
		if err != nil {
			return shardmap.Value{}, fmt.Errorf("key %q is not a uuid: %w", text, err)
		}
		return shardmap.Str(pghash.FormatUUID(u)), nil
	}
	return shardmap.Str(text), nil
}

func keyspaceID(kind shardmap.VindexKind, t shardmap.KeyType, text string) ([8]byte, error) {
	integer := t == shardmap.Bigint || t == shardmap.Integer
	switch kind {
	case shardmap.VindexHash:
		if integer {
			v, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
			if err != nil {
				return [8]byte{}, fmt.Errorf("key %q is not an integer", text)
			}
			return vindex.Hash(uint64(v)), nil
		}
		return vindex.HashText(text)
	case shardmap.VindexXXHash:
		if integer {
			v, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
			if err != nil {
				return [8]byte{}, fmt.Errorf("key %q is not an integer", text)
			}
			return vindex.XXHashInt64(v), nil
		}
		return vindex.XXHashString(text), nil
	}
	return [8]byte{}, errors.New("unknown vindex")
}

func bound(v *shardmap.Value, open string) string {
	if v == nil {
		return open
	}
	return v.String()
}

func (l Location) explain(w io.Writer, label string) {
	fmt.Fprintf(w, "%s: %s = %s (%s), %s\n", label, l.Column, l.Key, l.Type, l.Scheme)
	switch {
	case l.Hash != "":
		fmt.Fprintf(w, "  row hash    %s (Postgres hash partitioning, seed HASH_PARTITION_SEED)\n", l.Hash)
		fmt.Fprintf(w, "  remainder   %d = hash mod %d\n", l.Remainder, l.Modulus)
	case l.KeyspaceID != "":
		fmt.Fprintf(w, "  keyspace id %s, in range %s\n", l.KeyspaceID, l.Range)
	case l.Rule != "":
		fmt.Fprintf(w, "  rule        %s\n", l.Rule)
	}
	fmt.Fprintf(w, "  shard       %d %s at %s (fence %s)\n", l.Index, l.Shard, l.Backend, l.Fence)
}

func newLocateCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "locate <db> <key>",
		Short: "Say which shard holds a key, and why (hash, remainder or keyspace id and range)",
		Long: `locate computes the shard a sharding key routes to under the database's record, with
the routers' own functions (Postgres hash partitioning for PgDog, the vindex for Vitess),
and shows each step. While a reshard is under way it also shows where the key goes in the
target layout.`,
		Example: `  loamrouter locate app 42
  loamrouter locate app 42 --output json
  loamrouter locate customer 'a3bb189e-8bf9-3888-9912-ace4e6543002'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			rec, err := s.Read(cmd.Context(), c.db(args[0]))
			if err != nil {
				return fmt.Errorf("%s: %w", c.db(args[0]), err)
			}
			now, err := locate(rec.Layout, args[1])
			if err != nil {
				return fmt.Errorf("%s generation %d: %w", c.db(args[0]), rec.Generation, err)
			}
			out := map[string]any{"db": c.db(args[0]).String(), "generation": rec.Generation, "location": now}
			var target *Location
			if rec.Target != nil {
				t, err := locate(*rec.Target, args[1])
				if err != nil {
					return fmt.Errorf("%s target layout (generation %d): %w", c.db(args[0]), rec.State.To, err)
				}
				target = &t
				out["target_generation"], out["target"] = rec.State.To, t
			}
			return c.emit(cmd.OutOrStdout(), out, func(w io.Writer) error {
				now.explain(w, fmt.Sprintf("%s generation %d", c.db(args[0]), rec.Generation))
				if target != nil {
					target.explain(w, fmt.Sprintf("after the reshard (generation %d)", rec.State.To))
				}
				return nil
			})
		},
	}
}
