package postgres_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/postgres"
	"loam.dev/router/kernel/shardmap"
)

// The cutover's step 3 on one source shard, then split verification: the source's rows of
// destination shard 1 must digest like the destination's table.
func ExampleBackend_FenceWrites() {
	ctx := context.Background()
	src, err := postgres.Open(ctx, "postgres://loam_admin@shard-0.db.internal:5432/app", postgres.Options{
		TLS: &tls.Config{ServerName: "shard-0.db.internal"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	if err := src.FenceWrites(ctx, "app"); err != nil {
		log.Fatal(err) // the fence is not known to hold: do not cut over
	}
	scheme := shardmap.PgHash{Key: shardmap.Key{Column: "id", Type: shardmap.Bigint}, Shards: 2}
	want, err := src.Checksum(ctx, "public.orders", adapters.ShardFn{Scheme: scheme, Shard: 1})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("shard 1 of orders: %d rows, digest %x", want.Rows, want.Sum)
}

// A write that fails because the shard was fenced is told apart from other failures.
func ExampleIsFenceError() {
	var err error // from a pgx call of an application session
	if errors.Is(postgres.Classify("shard-0:5432", "Insert", err), adapters.ErrFenced) {
		log.Print("shard fenced: wait for the new shard map instead of retrying here")
	}
}
