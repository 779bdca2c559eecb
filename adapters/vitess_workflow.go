package adapters

import "context"

// VitessWorkflows is the part of vtctld's API a Vitess Reshard drives (machine/vreshard):
// the workflow's life (create, status, VDiff, traffic switches, complete, cancel) and the
// facts its pre-flight checks. The gRPC implementation is adapters/vtctld's Client. It is
// apart from VitessControl so that a failover needs only the reparent.
//
// Errors are *VitessError; errors.Is matches ErrNotFound for a workflow (or VDiff) vtctld
// does not know and ErrUnreachable for a vtctld that did not answer.
type VitessWorkflows interface {
	// ReshardCreate creates workflow in keyspace, copying source into target (ReshardCreate
	// with tablet types primary,replica,rdonly; schema copied; started).
	ReshardCreate(ctx context.Context, keyspace, workflow string, cells, source, target []string) error
	// Workflow reads how workflow stands (GetWorkflows and WorkflowStatus).
	Workflow(ctx context.Context, keyspace, workflow string) (WorkflowState, error)
	// VDiff creates the VDiff uuid of workflow when it does not exist yet, and reports it.
	VDiff(ctx context.Context, keyspace, workflow, uuid string) (VDiffReport, error)
	// SwitchTraffic serves types from the target shards, or (reverse) from the source ones
	// again, reverse replication on (WorkflowSwitchTraffic).
	SwitchTraffic(ctx context.Context, keyspace, workflow string, types []TabletType, reverse bool) error
	// CompleteWorkflow completes the workflow (Reshard complete: MoveTablesComplete).
	CompleteWorkflow(ctx context.Context, keyspace, workflow string) error
	// CancelWorkflow deletes the workflow's streams (Reshard cancel: WorkflowDelete).
	CancelWorkflow(ctx context.Context, keyspace, workflow string) error
	// Shard reads a shard's record: whether its primary serves, and its primary tablet.
	Shard(ctx context.Context, keyspace, shard string) (ShardInfo, error)
	// Fetch runs query on tablet's MySQL as the DBA user, in the tablet's database
	// (ExecuteFetchAsDBA), and returns the rows as text (nil for NULL).
	Fetch(ctx context.Context, tablet, query string) ([][][]byte, error)
	// VSchema reads keyspace's VSchema: its sharded flag and, per table, its type and the
	// type of its primary (first) vindex.
	VSchema(ctx context.Context, keyspace string) (VSchemaInfo, error)
	// Tablet reads a tablet's record (GetTablets): its shard and where its MySQL listens,
	// which a reshard's record names as a target shard's primary.
	Tablet(ctx context.Context, alias string) (TabletInfo, error)
}

// TabletInfo is a tablet's record: the shard it belongs to and its MySQL server (host,
// port and the database the tablet serves, vt_<keyspace> unless overridden).
type TabletInfo struct {
	Alias, Keyspace, Shard string
	MySQLHost              string
	MySQLPort              int
	DBName                 string
}

// WorkflowState is a workflow as vtctld reports it.
type WorkflowState struct {
	Source, Target []string // shards
	// Copying: a stream still copies rows. Failed: a stream's message when one is in error.
	Copying bool
	Failed  string
	// LagSeconds is the largest replication lag of the streams (max_v_replication_lag).
	LagSeconds int64
	// Traffic is WorkflowStatus's traffic_state ("Reads Not Switched. Writes Not
	// Switched", "All Reads Switched. Writes Switched", ...); ReadsSwitched and
	// WritesSwitched are read from it.
	Traffic                       string
	ReadsSwitched, WritesSwitched bool
}

// VDiffReport is a VDiff's state: Done when every target shard's VDiff completed; then
// Mismatch lists the tables with rows that differ (or extra on one side) and Rows the rows
// compared. Failed is the error a shard's VDiff reports.
type VDiffReport struct {
	Done     bool
	Mismatch []string
	Rows     int64
	Failed   string
}

// ShardInfo is a shard's record.
type ShardInfo struct {
	Serving bool
	Primary string // tablet alias, "" when none
}

// VSchemaInfo is what the pre-flight reads of a VSchema.
type VSchemaInfo struct {
	Sharded bool
	Tables  map[string]VSchemaTable
}

// VSchemaTable is one table of a VSchema: its type ("", "reference", "sequence") and the
// vindex type of its first column vindex ("" when none).
type VSchemaTable struct {
	Type, PrimaryVindex string
}
