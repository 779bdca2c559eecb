package vtctld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/adapters"
)

var _ adapters.VitessWorkflows = (*Client)(nil)

var allTypes = []int32{int32(adapters.TabletPrimary), int32(adapters.TabletReplica), int32(adapters.TabletRdonly)}

// call invokes method under the client's timeout and wraps its error. vtctld answers a
// workflow or VDiff it does not know with code Unknown and words (v0.24.4: "... not found",
// "no streams found", "no vdiff found for UUID ..."): those match adapters.ErrNotFound.
func (c *Client) call(ctx context.Context, method, keyspace, shard string, req message, resp reply) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.invoke(ctx, method, req, resp); err != nil {
		e := c.error(method, keyspace, shard, "", err, "")
		if ve, ok := e.(*adapters.VitessError); ok && ve.Code != "" && (strings.Contains(ve.Err.Error(), "not found") || strings.Contains(ve.Err.Error(), "no streams found") || strings.Contains(ve.Err.Error(), "no vdiff found")) && !strings.Contains(ve.Err.Error(), adapters.ErrNotFound.Error()) {
			ve.Err = fmt.Errorf("%w: %s", adapters.ErrNotFound, ve.Err.Error())
		}
		return e
	}
	return nil
}

// ReshardCreate creates the Reshard workflow (tablet types primary,replica,rdonly; started).
func (c *Client) ReshardCreate(ctx context.Context, keyspace, workflow string, cells, source, target []string) error {
	return c.call(ctx, "ReshardCreate", keyspace, "", reshardCreateRequest{workflow: workflow, keyspace: keyspace,
		source: source, target: target, cells: cells, types: allTypes}, &ignored{})
}

// Workflow reads the workflow through GetWorkflows and WorkflowStatus; an error matching
// adapters.ErrNotFound when vtctld lists no such workflow.
func (c *Client) Workflow(ctx context.Context, keyspace, workflow string) (adapters.WorkflowState, error) {
	var list getWorkflowsResponse
	if err := c.call(ctx, "GetWorkflows", keyspace, "", getWorkflowsRequest{keyspace: keyspace, workflow: workflow}, &list); err != nil {
		return adapters.WorkflowState{}, err
	}
	i := slices.IndexFunc(list.workflows, func(w workflowInfo) bool { return w.name == workflow })
	if i < 0 {
		return adapters.WorkflowState{}, c.error("GetWorkflows", keyspace, "", "", fmt.Errorf("%w: no workflow %s in keyspace %s", adapters.ErrNotFound, workflow, keyspace), "")
	}
	w := list.workflows[i]
	out := adapters.WorkflowState{Source: w.source, Target: w.target, LagSeconds: w.maxLag, Copying: w.copyStates > 0}
	for j, st := range w.states {
		switch strings.ToLower(st) {
		case "copying":
			out.Copying = true
		case "error":
			out.Failed = w.messages[j]
		}
	}
	var status workflowStatusResponse
	if err := c.call(ctx, "WorkflowStatus", keyspace, "", workflowRequest{keyspace: keyspace, workflow: workflow}, &status); err != nil {
		return adapters.WorkflowState{}, err
	}
	out.Traffic = status.traffic
	out.ReadsSwitched, out.WritesSwitched = trafficSwitched(status.traffic)
	return out, nil
}

// trafficSwitched reads WorkflowStatus's traffic_state, as Vitess v0.24.4 words it
// (go/vt/vtctl/workflow/state.go): "All Reads Switched" / "Reads Not Switched" / "Reads
// partially switched...", then "Writes Switched" / "Writes Not Switched" / "Writes
// partially switched".
func trafficSwitched(s string) (reads, writes bool) {
	return strings.Contains(s, "All Reads Switched"), strings.Contains(s, "Writes Switched") && !strings.Contains(s, "Writes Not Switched")
}

// VDiff creates VDiff uuid when VDiffShow does not know it, then reports its summary.
func (c *Client) VDiff(ctx context.Context, keyspace, workflow, uuid string) (adapters.VDiffReport, error) {
	var show vdiffShowResponse
	err := c.call(ctx, "VDiffShow", keyspace, "", vdiffShowRequest{keyspace: keyspace, workflow: workflow, arg: uuid}, &show)
	if err == nil && !hasRows(show) || errors.Is(err, adapters.ErrNotFound) {
		if err := c.call(ctx, "VDiffCreate", keyspace, "", vdiffCreateRequest{keyspace: keyspace, workflow: workflow, uuid: uuid, types: allTypes}, &ignored{}); err != nil {
			return adapters.VDiffReport{}, err
		}
		return adapters.VDiffReport{}, nil
	}
	if err != nil {
		return adapters.VDiffReport{}, err
	}
	return summarize(show)
}

func hasRows(s vdiffShowResponse) bool {
	for _, q := range s.outputs {
		if len(q.rows) > 0 {
			return true
		}
	}
	return false
}

// summarize reads each target shard's VDiff summary rows (go/vt/vttablet/tabletmanager/
// vdiff/schema.go sqlVDiffSummary: vdiff_state, last_error, table_name, rows_compared,
// has_mismatch, report).
func summarize(s vdiffShowResponse) (adapters.VDiffReport, error) {
	out := adapters.VDiffReport{Done: len(s.outputs) > 0}
	mismatch := map[string]bool{}
	for _, q := range s.outputs {
		col := func(row [][]byte, name string) string {
			if i := slices.Index(q.names, name); i >= 0 && i < len(row) {
				return string(row[i])
			}
			return ""
		}
		if len(q.rows) == 0 {
			out.Done = false
		}
		for _, row := range q.rows {
			if st := col(row, "vdiff_state"); st != "completed" {
				out.Done = false
				if st == "error" {
					out.Failed = col(row, "last_error")
				}
			}
			n, _ := strconv.ParseInt(col(row, "rows_compared"), 10, 64)
			out.Rows += n
			table := col(row, "table_name")
			if col(row, "has_mismatch") == "1" {
				mismatch[table] = true
			}
			var rep struct{ MismatchedRows, ExtraRowsSource, ExtraRowsTarget int64 }
			if r := col(row, "report"); r != "" && json.Unmarshal([]byte(r), &rep) == nil && rep.MismatchedRows+rep.ExtraRowsSource+rep.ExtraRowsTarget > 0 {
				mismatch[table] = true
			}
		}
	}
	for t := range mismatch {
		out.Mismatch = append(out.Mismatch, t)
	}
	slices.Sort(out.Mismatch)
	return out, nil
}

// SwitchTraffic switches types forward or back (max lag and timeout 30 s, as the CLI).
func (c *Client) SwitchTraffic(ctx context.Context, keyspace, workflow string, types []adapters.TabletType, reverse bool) error {
	ts := make([]int32, len(types))
	for i, t := range types {
		ts[i] = int32(t)
	}
	return c.call(ctx, "WorkflowSwitchTraffic", keyspace, "", switchTrafficRequest{keyspace: keyspace, workflow: workflow, types: ts, reverse: reverse, maxLag: 30, timeout: 30}, &ignored{})
}

// CompleteWorkflow completes the workflow (MoveTablesComplete completes a Reshard too).
func (c *Client) CompleteWorkflow(ctx context.Context, keyspace, workflow string) error {
	return c.call(ctx, "MoveTablesComplete", keyspace, "", completeRequest{keyspace: keyspace, workflow: workflow}, &ignored{})
}

// CancelWorkflow deletes the workflow (WorkflowDelete, as Reshard cancel does: the streams
// go; the source shards keep serving and their data).
func (c *Client) CancelWorkflow(ctx context.Context, keyspace, workflow string) error {
	return c.call(ctx, "WorkflowDelete", keyspace, "", workflowRequest{keyspace: keyspace, workflow: workflow}, &ignored{})
}

// Shard reads a shard's record (GetShard).
func (c *Client) Shard(ctx context.Context, keyspace, shard string) (adapters.ShardInfo, error) {
	var r getShardResponse
	if err := c.call(ctx, "GetShard", keyspace, shard, getShardRequest{keyspace: keyspace, shard: shard}, &r); err != nil {
		return adapters.ShardInfo{}, err
	}
	out := adapters.ShardInfo{Serving: r.serving}
	if r.primary != nil && r.primary.uid != 0 {
		out.Primary = aliasString(r.primary)
	}
	return out, nil
}

// Fetch runs query on tablet's MySQL as the DBA (ExecuteFetchAsDBA, at most 10000 rows).
func (c *Client) Fetch(ctx context.Context, tablet, query string) ([][][]byte, error) {
	a, err := adapters.ParseTabletAlias(tablet)
	if err != nil {
		return nil, c.error("ExecuteFetchAsDBA", "", "", tablet, err, "")
	}
	var resp fetchResponse
	if err := c.call(ctx, "ExecuteFetchAsDBA", "", "", fetchRequest{tablet: tabletAlias{cell: a.Cell, uid: a.UID}, query: query, maxRows: 10000}, &resp); err != nil {
		return nil, err
	}
	return resp.rows, nil
}

// VSchema reads keyspace's VSchema (GetVSchema).
func (c *Client) VSchema(ctx context.Context, keyspace string) (adapters.VSchemaInfo, error) {
	var r getVSchemaResponse
	if err := c.call(ctx, "GetVSchema", keyspace, "", getVSchemaRequest{keyspace: keyspace}, &r); err != nil {
		return adapters.VSchemaInfo{}, err
	}
	out := adapters.VSchemaInfo{Sharded: r.sharded, Tables: map[string]adapters.VSchemaTable{}}
	for name, t := range r.tables {
		v := ""
		if t[1] != "" {
			v = r.vindexes[t[1]]
			if v == "" {
				v = "?" + t[1] // names a vindex the VSchema does not define
			}
		}
		out.Tables[name] = adapters.VSchemaTable{Type: t[0], PrimaryVindex: v}
	}
	return out, nil
}

// Tablet reads a tablet's record (GetTablets, strict): its shard and its MySQL server. A
// tablet vtctld does not list is an error matching adapters.ErrNotFound.
func (c *Client) Tablet(ctx context.Context, alias string) (adapters.TabletInfo, error) {
	a, err := adapters.ParseTabletAlias(alias)
	if err != nil {
		return adapters.TabletInfo{}, c.error("GetTablets", "", "", alias, err, "give a tablet alias, as vtctldclient GetTablets prints it")
	}
	pb := tabletAlias{cell: a.Cell, uid: a.UID}
	var got getTabletsResponse
	if err := c.call(ctx, "GetTablets", "", "", getTabletsRequest{aliases: []tabletAlias{pb}, strict: true}, &got); err != nil {
		return adapters.TabletInfo{}, err
	}
	i := slices.IndexFunc(got.tablets, func(t tabletRecord) bool { return t.alias == pb })
	if i < 0 {
		return adapters.TabletInfo{}, c.error("GetTablets", "", "", alias, fmt.Errorf("%w: vtctld lists no tablet %s", adapters.ErrNotFound, alias), "")
	}
	t := got.tablets[i]
	db := t.dbName
	if db == "" {
		db = "vt_" + t.keyspace
	}
	return adapters.TabletInfo{Alias: a.String(), Keyspace: t.keyspace, Shard: t.shard, MySQLHost: t.mysqlHost, MySQLPort: int(t.mysqlPort), DBName: db}, nil
}
