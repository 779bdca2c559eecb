package main

import (
	"context"
	"errors"
	"fmt"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
)

// errNoAdapter says this build cannot reach a kind of system yet.
var errNoAdapter = errors.New("this build has no adapter for it yet")

// openShards opens every shard backend of rec for the in-doubt monitor.
func openShards(ctx context.Context, d *DatabaseConfig, rec *shardmap.Record) (map[string]driver.PreparedLister, func(), error) {
	return nil, func() {}, fmt.Errorf("shards of %s: Postgres: %w", d.Name, errNoAdapter)
}

// openRouters opens a database's router instances.
func openRouters(d *DatabaseConfig) (map[string]adapters.RouterInstance, error) {
	if len(d.Routers) == 0 {
		return map[string]adapters.RouterInstance{}, nil
	}
	return nil, fmt.Errorf("routers of %s: PgDog admin: %w", d.Name, errNoAdapter)
}
