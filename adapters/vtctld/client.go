package vtctld

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/keyrange"
)

// Config says how to reach vtctld.
type Config struct {
	// Addr is vtctld's gRPC address, host:port (the port of its --grpc-port flag).
	Addr string
	// TLS, when set, secures the connection: vtctld serves TLS when started with
	// --grpc-cert and --grpc-key, and asks for a client certificate with --grpc-ca (set
	// Certificates then). Nil connects in plaintext, as vtctld serves without those flags.
	TLS *tls.Config
	// Timeout bounds every call, whatever the caller's context allows (default
	// DefaultTimeout): a vtctld that hangs fails the call instead of holding the machine.
	Timeout time.Duration
	// DialOptions are appended to the client's own (transport credentials), e.g.
	// interceptors or keepalive parameters.
	DialOptions []grpc.DialOption
}

// DefaultTimeout is Config.Timeout's default.
const DefaultTimeout = 30 * time.Second

// Client is an adapters.VitessControl over one vtctld. It is safe for concurrent use.
type Client struct {
	addr    string
	conn    *grpc.ClientConn
	timeout time.Duration
}

var _ adapters.VitessControl = (*Client)(nil)

// Dial makes a client for cfg.Addr. It does not connect: the connection is made by the
// first call and remade after failures, so a vtctld that is down fails calls
// (adapters.ErrUnreachable) rather than Dial.
func Dial(cfg Config) (*Client, error) {
	if cfg.Addr == "" {
		return nil, errors.New("vtctld: Config.Addr is empty; give vtctld's gRPC address, host:port")
	}
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{}))}, cfg.DialOptions...)
	conn, err := grpc.Dial(cfg.Addr, opts...) // does not connect: the first call does
	if err != nil {
		return nil, fmt.Errorf("vtctld: client for %s: %w", cfg.Addr, err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{addr: cfg.Addr, conn: conn, timeout: timeout}, nil
}

// invoke calls method of the Vtctld service (vtctlservice.proto).
func (c *Client) invoke(ctx context.Context, method string, req message, resp reply) error {
	return c.conn.Invoke(ctx, "/vtctlservice.Vtctld/"+method, req, resp)
}

// Close closes the connection; calls in flight fail.
func (c *Client) Close() error { return c.conn.Close() }

// TabletExternallyReparented makes tablet the primary of keyspace/shard in Vitess's
// topology, after checking with GetTablets that the tablet is one of keyspace/shard's.
func (c *Client) TabletExternallyReparented(ctx context.Context, keyspace, shard, tablet string) (adapters.Reparented, error) {
	fail := func(op string, err error, fix string) (adapters.Reparented, error) {
		return adapters.Reparented{}, c.error(op, keyspace, shard, tablet, err, fix)
	}
	alias, err := adapters.ParseTabletAlias(tablet)
	if err != nil {
		return fail("TabletExternallyReparented", err, "give the promoted primary's tablet alias, as vtctldclient GetTablets prints it")
	}
	pb := tabletAlias{cell: alias.Cell, uid: alias.UID}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	var got getTabletsResponse
	if err := c.invoke(ctx, "GetTablets", getTabletsRequest{aliases: []tabletAlias{pb}, strict: true}, &got); err != nil {
		return fail("GetTablets", err, "")
	}
	var t *tabletRecord
	for i, x := range got.tablets {
		if x.alias == pb {
			t = &got.tablets[i]
		}
	}
	if t == nil {
		return fail("GetTablets", fmt.Errorf("%w: vtctld lists no tablet %s", adapters.ErrNotFound, alias),
			"start the promoted primary's vttablet, or give the alias of the tablet in front of it")
	}
	if t.keyspace != keyspace || !strings.EqualFold(t.shard, shard) {
		return fail("GetTablets", fmt.Errorf("%w: tablet %s serves %s/%s", adapters.ErrWrongShard, alias, t.keyspace, t.shard),
			"nothing was reparented; give a tablet of "+keyspace+"/"+shard)
	}

	// The promoted MySQL must already be writable. vtctld's ChangeType to PRIMARY fails on
	// a read-only one (errno 1290) after writing PRIMARY into the tablet's record, and from
	// then on TabletExternallyReparented answers "already primary" without doing anything:
	// checking here, on every call, is what keeps such a half-done call from passing for
	// done when it is retried.
	if err := c.writable(ctx, pb); err != nil {
		fix := "" // vtctld could not ask the tablet: what its code suggests
		if errors.Is(err, adapters.ErrNotWritable) {
			fix = "nothing was reparented; finish the promotion outside Vitess first: make " + alias.String() + "'s MySQL writable (SET GLOBAL read_only = 0), then retry"
		}
		return fail("ExecuteFetchAsDBA", err, fix)
	}
	var resp reparentResponse
	if err := c.invoke(ctx, "TabletExternallyReparented", reparentRequest{tablet: pb}, &resp); err != nil {
		if st, ok := status.FromError(err); ok && (strings.Contains(st.Message(), "1290") || strings.Contains(st.Message(), "read-only")) {
			err = fmt.Errorf("%w: %s", adapters.ErrNotWritable, st.Message())
		}
		return fail("TabletExternallyReparented", err, "")
	}
	out := adapters.Reparented{Keyspace: resp.keyspace, Shard: resp.shard, NewPrimary: aliasString(resp.newPrimary), OldPrimary: aliasString(resp.oldPrimary)}
	if out.Keyspace != keyspace || !strings.EqualFold(out.Shard, shard) || out.NewPrimary != alias.String() {
		return out, c.error("TabletExternallyReparented", keyspace, shard, tablet,
			fmt.Errorf("%w: vtctld reparented %s/%s to %s", adapters.ErrWrongShard, out.Keyspace, out.Shard, out.NewPrimary),
			"the tablet moved between the check and the reparent; inspect both shards with vtctldclient GetTablets")
	}
	return out, nil
}

// writable asks the tablet's MySQL, through vtctld (ExecuteFetchAsDBA), whether it is
// read-only; an error matching adapters.ErrNotWritable when it is.
func (c *Client) writable(ctx context.Context, tablet tabletAlias) error {
	var resp fetchResponse
	if err := c.invoke(ctx, "ExecuteFetchAsDBA", fetchRequest{tablet: tablet, query: "SELECT @@global.read_only", maxRows: 1}, &resp); err != nil {
		return err
	}
	if len(resp.rows) != 1 || len(resp.rows[0]) != 1 {
		return fmt.Errorf("vtctld: SELECT @@global.read_only on %s answered %d rows, want 1 of 1 column", aliasString(&tablet), len(resp.rows))
	}
	switch v := string(resp.rows[0][0]); v {
	case "0", "OFF":
		return nil
	case "1", "ON":
		return fmt.Errorf("%w: @@global.read_only is %s on %s", adapters.ErrNotWritable, v, aliasString(&tablet))
	default:
		return fmt.Errorf("vtctld: SELECT @@global.read_only on %s answered %q", aliasString(&tablet), v)
	}
}

func aliasString(a *tabletAlias) string {
	if a == nil {
		return ""
	}
	return adapters.TabletAlias{Cell: a.cell, UID: a.uid}.String()
}

// SrvKeyspace returns the serving partitions of keyspace in cell, from GetSrvKeyspaces.
func (c *Client) SrvKeyspace(ctx context.Context, keyspace, cell string) ([]adapters.SrvPartition, error) {
	if cell == "" {
		return nil, c.error("GetSrvKeyspaces", keyspace, "", "", errors.New("no cell given"), "name the cell whose serving graph to read, e.g. zone1")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var resp srvKeyspacesResponse
	if err := c.invoke(ctx, "GetSrvKeyspaces", srvKeyspacesRequest{keyspace: keyspace, cells: []string{cell}}, &resp); err != nil {
		return nil, c.error("GetSrvKeyspaces", keyspace, "", "", err, "")
	}
	srv, ok := resp.byCell[cell]
	if !ok || srv == nil || len(srv.partitions) == 0 { // a cell without the keyspace's serving graph answers an empty one
		return nil, c.error("GetSrvKeyspaces", keyspace, "", "", fmt.Errorf("%w: no SrvKeyspace in cell %s", adapters.ErrNotFound, cell),
			"build the serving graph: vtctldclient RebuildKeyspaceGraph "+keyspace+" (the cell must be registered with AddCellInfo)")
	}
	var out []adapters.SrvPartition
	for _, p := range srv.partitions {
		part := adapters.SrvPartition{Type: adapters.TabletType(p.servedType)}
		for _, ref := range p.refs {
			r, err := shardRange(ref)
			if err != nil {
				return nil, c.error("GetSrvKeyspaces", keyspace, ref.name, "", err, "")
			}
			part.Shards = append(part.Shards, adapters.SrvShard{Name: ref.name, Range: r})
		}
		out = append(out, part)
	}
	return out, nil
}

// shardRange reads a shard reference's key range; a shard without one (an unsharded
// keyspace's "0") covers everything.
func shardRange(ref shardReference) (keyrange.Range, error) {
	kr := ref.keyRange
	if kr == nil || len(kr.start) == 0 && len(kr.end) == 0 {
		if r, err := keyrange.Parse(ref.name); err == nil && r.IsFull() {
			return r, nil
		}
		return keyrange.Full(), nil
	}
	r, err := keyrange.Parse(hex.EncodeToString(kr.start) + "-" + hex.EncodeToString(kr.end))
	if err != nil {
		return keyrange.Range{}, fmt.Errorf("vtctld: shard %q: key range: %w", ref.name, err)
	}
	return r, nil
}

// ApplyVSchema applies vschema, the JSON of vschema.Keyspace, to keyspace with strict set.
func (c *Client) ApplyVSchema(ctx context.Context, keyspace string, vschema []byte) error {
	ks, err := encodeVSchema(vschema)
	if err != nil {
		return c.error("ApplyVSchema", keyspace, "", "", err, "nothing was sent; render the VSchema with kernel/render.Vitess")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var resp applyVSchemaResponse
	if err := c.invoke(ctx, "ApplyVSchema", applyVSchemaRequest{keyspace: keyspace, vschema: ks, strict: true}, &resp); err != nil {
		return c.error("ApplyVSchema", keyspace, "", "", err, "")
	}
	if unknown := resp.unknown; len(unknown) > 0 {
		var names []string
		for vindex, params := range unknown {
			names = append(names, vindex+": "+strings.Join(params, ","))
		}
		sort.Strings(names)
		return c.error("ApplyVSchema", keyspace, "", "", fmt.Errorf("vtctld reports unknown vindex parameters (%s)", strings.Join(names, "; ")),
			"remove them from the VSchema")
	}
	return nil
}
