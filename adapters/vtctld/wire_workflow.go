package vtctld

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// Workflow messages (vtctldata.proto, vschema.proto, topodata.proto, query.proto of
// v0.24.4), encoded and decoded as wire.go's are.

func appendStrings(b []byte, num protowire.Number, ss []string) []byte {
	for _, s := range ss {
		b = protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
	}
	return b
}

// appendEnums encodes a repeated enum, packed.
func appendEnums(b []byte, num protowire.Number, vs []int32) []byte {
	if len(vs) == 0 {
		return b
	}
	var p []byte
	for _, v := range vs {
		p = protowire.AppendVarint(p, uint64(v))
	}
	return appendBytes(b, num, p)
}

// duration is vttime.Duration {1: seconds, 2: nanos}.
func duration(seconds int64) []byte { return appendVarint(nil, 1, uint64(seconds)) }

// reshardCreateRequest is vtctldata.ReshardCreateRequest {1: workflow, 2: keyspace,
// 3: source_shards, 4: target_shards, 5: cells, 6: tablet_types, 12: auto_start}.
type reshardCreateRequest struct {
	workflow, keyspace    string
	source, target, cells []string
	types                 []int32
}

func (r reshardCreateRequest) marshal() []byte {
	b := appendString(nil, 1, r.workflow)
	b = appendString(b, 2, r.keyspace)
	b = appendStrings(b, 3, r.source)
	b = appendStrings(b, 4, r.target)
	b = appendStrings(b, 5, r.cells)
	b = appendEnums(b, 6, r.types)
	return appendBool(b, 12, true)
}

// ignored is a response the client does not read.
type ignored struct{}

func (*ignored) unmarshal(b []byte) error { return fields(b, func(field) error { return nil }) }

// workflowRequest is {1: keyspace, 2: workflow}: WorkflowStatusRequest and
// WorkflowDeleteRequest.
type workflowRequest struct{ keyspace, workflow string }

func (r workflowRequest) marshal() []byte {
	return appendString(appendString(nil, 1, r.keyspace), 2, r.workflow)
}

// getWorkflowsRequest is vtctldata.GetWorkflowsRequest {1: keyspace, 4: workflow}.
type getWorkflowsRequest struct{ keyspace, workflow string }

func (r getWorkflowsRequest) marshal() []byte {
	return appendString(appendString(nil, 1, r.keyspace), 4, r.workflow)
}

// getWorkflowsResponse is vtctldata.GetWorkflowsResponse {1: workflows}, each Workflow
// {1: name, 2: source ReplicationLocation {1: keyspace, 2: shards}, 3: target,
// 4: max_v_replication_lag, 5: shard_streams map -> ShardStream {1: streams, Stream
// {7: state, 11: message, 12: copy_states}}}.
type getWorkflowsResponse struct{ workflows []workflowInfo }

type workflowInfo struct {
	name           string
	source, target []string
	maxLag         int64
	states         []string // of every stream
	messages       []string
	copyStates     int
}

func (r *getWorkflowsResponse) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num != 1 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		var w workflowInfo
		err := fields(fl.bytes, func(fl field) error {
			switch fl.num {
			case 1:
				if err := fl.want(protowire.BytesType); err != nil {
					return err
				}
				w.name = string(fl.bytes)
			case 2, 3:
				if err := fl.want(protowire.BytesType); err != nil {
					return err
				}
				var shards []string
				err := fields(fl.bytes, func(f2 field) error {
					if f2.num != 2 {
						return nil
					}
					if err := f2.want(protowire.BytesType); err != nil {
						return err
					}
					shards = append(shards, string(f2.bytes))
					return nil
				})
				if fl.num == 2 {
					w.source = shards
				} else {
					w.target = shards
				}
				return err
			case 4:
				if err := fl.want(protowire.VarintType); err != nil {
					return err
				}
				w.maxLag = int64(fl.varint)
			case 5:
				if err := fl.want(protowire.BytesType); err != nil {
					return err
				}
				_, v, err := mapEntry(fl.bytes)
				if err != nil {
					return err
				}
				return fields(v, func(f2 field) error {
					if f2.num != 1 {
						return nil
					}
					if err := f2.want(protowire.BytesType); err != nil {
						return err
					}
					state, msg := "", ""
					err := fields(f2.bytes, func(f3 field) error {
						switch f3.num {
						case 7, 11:
							if err := f3.want(protowire.BytesType); err != nil {
								return err
							}
							if f3.num == 7 {
								state = string(f3.bytes)
							} else {
								msg = string(f3.bytes)
							}
						case 12:
							w.copyStates++
						}
						return nil
					})
					w.states, w.messages = append(w.states, state), append(w.messages, msg)
					return err
				})
			}
			return nil
		})
		if err != nil {
			return err
		}
		r.workflows = append(r.workflows, w)
		return nil
	})
}

// workflowStatusResponse is the part of vtctldata.WorkflowStatusResponse the client
// reads: {3: traffic_state}.
type workflowStatusResponse struct{ traffic string }

func (r *workflowStatusResponse) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num != 3 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		r.traffic = string(fl.bytes)
		return nil
	})
}

// switchTrafficRequest is vtctldata.WorkflowSwitchTrafficRequest {1: keyspace,
// 2: workflow, 3: cells, 4: tablet_types, 5: max_replication_lag_allowed,
// 6: enable_reverse_replication, 7: direction (0 forward, 1 backward), 8: timeout}.
type switchTrafficRequest struct {
	keyspace, workflow string
	cells              []string
	types              []int32
	reverse            bool
	maxLag, timeout    int64 // seconds
}

func (r switchTrafficRequest) marshal() []byte {
	b := appendString(nil, 1, r.keyspace)
	b = appendString(b, 2, r.workflow)
	b = appendStrings(b, 3, r.cells)
	b = appendEnums(b, 4, r.types)
	b = appendBytes(b, 5, duration(r.maxLag))
	b = appendBool(b, 6, true)
	if r.reverse {
		b = appendVarint(b, 7, 1)
	}
	return appendBytes(b, 8, duration(r.timeout))
}

// completeRequest is vtctldata.MoveTablesCompleteRequest {1: workflow, 3: target_keyspace}.
type completeRequest struct{ keyspace, workflow string }

func (r completeRequest) marshal() []byte {
	return appendString(appendString(nil, 1, r.workflow), 3, r.keyspace)
}

// vdiffCreateRequest is vtctldata.VDiffCreateRequest {1: workflow, 2: target_keyspace,
// 3: uuid, 6: tablet_types}.
type vdiffCreateRequest struct {
	keyspace, workflow, uuid string
	types                    []int32
}

func (r vdiffCreateRequest) marshal() []byte {
	b := appendString(nil, 1, r.workflow)
	b = appendString(b, 2, r.keyspace)
	b = appendString(b, 3, r.uuid)
	return appendEnums(b, 6, r.types)
}

// vdiffShowRequest is vtctldata.VDiffShowRequest {1: workflow, 2: target_keyspace, 3: arg}.
type vdiffShowRequest struct{ keyspace, workflow, arg string }

func (r vdiffShowRequest) marshal() []byte {
	b := appendString(nil, 1, r.workflow)
	b = appendString(b, 2, r.keyspace)
	return appendString(b, 3, r.arg)
}

// vdiffShowResponse is vtctldata.VDiffShowResponse {1: tablet_responses map -> tabletmanagerdata.VDiffResponse
// {2: output QueryResult}}: per target shard primary, the VDiff's rows with their column
// names (QueryResult {1: fields Field {1: name}, 4: rows}).
type vdiffShowResponse struct{ outputs []queryResult }

type queryResult struct {
	names []string
	rows  [][][]byte
}

func (q *queryResult) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		switch fl.num {
		case 1:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			name := ""
			err := fields(fl.bytes, func(f2 field) error {
				if f2.num == 1 {
					if err := f2.want(protowire.BytesType); err != nil {
						return err
					}
					name = string(f2.bytes)
				}
				return nil
			})
			q.names = append(q.names, name)
			return err
		case 4:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			row, err := unmarshalRow(fl.bytes)
			if err != nil {
				return err
			}
			q.rows = append(q.rows, row)
		}
		return nil
	})
}

func (r *vdiffShowResponse) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num != 1 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		_, v, err := mapEntry(fl.bytes)
		if err != nil {
			return err
		}
		var q queryResult
		err = fields(v, func(f2 field) error {
			if f2.num != 2 {
				return nil
			}
			if err := f2.want(protowire.BytesType); err != nil {
				return err
			}
			return q.unmarshal(f2.bytes)
		})
		r.outputs = append(r.outputs, q)
		return err
	})
}

// getShardRequest is vtctldata.GetShardRequest {1: keyspace, 2: shard_name}.
type getShardRequest struct{ keyspace, shard string }

func (r getShardRequest) marshal() []byte {
	return appendString(appendString(nil, 1, r.keyspace), 2, r.shard)
}

// getShardResponse is vtctldata.GetShardResponse {1: vtctldata.Shard {3: topodata.Shard
// {1: primary_alias, 7: is_primary_serving}}}.
type getShardResponse struct {
	primary *tabletAlias
	serving bool
}

func (r *getShardResponse) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num != 1 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		return fields(fl.bytes, func(f2 field) error {
			if f2.num != 3 {
				return nil
			}
			if err := f2.want(protowire.BytesType); err != nil {
				return err
			}
			return fields(f2.bytes, func(f3 field) error {
				switch f3.num {
				case 1:
					if err := f3.want(protowire.BytesType); err != nil {
						return err
					}
					r.primary = &tabletAlias{}
					return r.primary.unmarshal(f3.bytes)
				case 7:
					if err := f3.want(protowire.VarintType); err != nil {
						return err
					}
					r.serving = f3.varint != 0
				}
				return nil
			})
		})
	})
}

// getVSchemaRequest is vtctldata.GetVSchemaRequest {1: keyspace}.
type getVSchemaRequest struct{ keyspace string }

func (r getVSchemaRequest) marshal() []byte { return appendString(nil, 1, r.keyspace) }

// getVSchemaResponse is vtctldata.GetVSchemaResponse {1: vschema.Keyspace {1: sharded,
// 2: vindexes map -> Vindex {1: type}, 3: tables map -> Table {1: type, 2: column_vindexes
// ColumnVindex {2: name}}}}.
type getVSchemaResponse struct {
	sharded  bool
	vindexes map[string]string    // name -> type
	tables   map[string][2]string // name -> {type, first column vindex's name}
}

func (r *getVSchemaResponse) unmarshal(b []byte) error {
	r.vindexes, r.tables = map[string]string{}, map[string][2]string{}
	str := func(b []byte, num protowire.Number) (string, error) {
		out := ""
		err := fields(b, func(fl field) error {
			if fl.num == num {
				if err := fl.want(protowire.BytesType); err != nil {
					return err
				}
				out = string(fl.bytes)
			}
			return nil
		})
		return out, err
	}
	return fields(b, func(fl field) error {
		if fl.num != 1 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		return fields(fl.bytes, func(f2 field) error {
			switch f2.num {
			case 1:
				if err := f2.want(protowire.VarintType); err != nil {
					return err
				}
				r.sharded = f2.varint != 0
			case 2, 3:
				if err := f2.want(protowire.BytesType); err != nil {
					return err
				}
				name, v, err := mapEntry(f2.bytes)
				if err != nil {
					return err
				}
				typ, err := str(v, 1)
				if err != nil {
					return err
				}
				if f2.num == 2 {
					r.vindexes[name] = typ
					return nil
				}
				first := ""
				seen := false
				err = fields(v, func(f3 field) error {
					if f3.num != 2 || seen {
						return nil
					}
					if err := f3.want(protowire.BytesType); err != nil {
						return err
					}
					seen = true
					first, err = str(f3.bytes, 2)
					return err
				})
				r.tables[name] = [2]string{typ, first}
				return err
			}
			return nil
		})
	})
}
