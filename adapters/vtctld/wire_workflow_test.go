package vtctld

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

func mapEntryOf(key string, value []byte) []byte {
	return appendBytes(appendString(nil, 1, key), 2, value)
}

// TestWorkflowDecode: a Workflow with its source and target shards, lag, and streams in
// every state the client reads; and WorkflowStatus's traffic state.
func TestWorkflowDecode(t *testing.T) {
	loc := func(shards ...string) []byte { return appendStrings(appendString(nil, 1, "rs"), 2, shards) }
	stream := func(state, msg string, copying bool) []byte {
		b := appendString(appendVarint(nil, 1, 1), 7, state)
		b = appendString(b, 11, msg)
		if copying {
			b = appendBytes(b, 12, appendString(nil, 1, "t"))
		}
		return b
	}
	wf := appendString(nil, 1, "split")
	wf = appendBytes(wf, 2, loc("0"))
	wf = appendBytes(wf, 3, loc("-80", "80-"))
	wf = appendVarint(wf, 4, 7)
	wf = appendBytes(wf, 5, mapEntryOf("-80", appendBytes(nil, 1, stream("Copying", "", true))))
	wf = appendBytes(wf, 5, mapEntryOf("80-", appendBytes(nil, 1, stream("Error", "duplicate key", false))))
	var got getWorkflowsResponse
	require.NoError(t, got.unmarshal(appendBytes(nil, 1, wf)))
	require.Equal(t, []workflowInfo{{name: "split", source: []string{"0"}, target: []string{"-80", "80-"}, maxLag: 7,
		states: []string{"Copying", "Error"}, messages: []string{"", "duplicate key"}, copyStates: 1}}, got.workflows)

	var st workflowStatusResponse
	require.NoError(t, st.unmarshal(appendString(nil, 3, "All Reads Switched. Writes Not Switched")))
	r, w := trafficSwitched(st.traffic)
	require.True(t, r)
	require.False(t, w)
	r, w = trafficSwitched("All Reads Switched. Writes Switched")
	require.True(t, r && w)
	r, w = trafficSwitched("Reads Not Switched. Writes Not Switched")
	require.False(t, r || w)
}

// TestVDiffSummary: the summary rows of two target shards, by column name; done only when
// every row says completed; a table with has_mismatch or a report counting differing or
// extra rows is a mismatch.
func TestVDiffSummary(t *testing.T) {
	field := func(name string) []byte { return appendBytes(nil, 1, appendString(nil, 1, name)) }
	row := func(vals ...string) []byte {
		var ls []byte
		var vs []byte
		for _, v := range vals {
			ls = protowire.AppendVarint(ls, protowire.EncodeZigZag(int64(len(v))))
			vs = append(vs, v...)
		}
		return appendBytes(nil, 4, appendBytes(appendBytes(nil, 1, ls), 2, vs))
	}
	qr := func(rows ...[]byte) []byte {
		var b []byte
		for _, n := range []string{"vdiff_state", "table_name", "rows_compared", "has_mismatch", "report"} {
			b = append(b, field(n)...)
		}
		for _, r := range rows {
			b = append(b, r...)
		}
		return b
	}
	resp := func(a, b []byte) []byte {
		out := appendBytes(nil, 1, mapEntryOf("zone1-200", appendBytes(nil, 2, a)))
		return appendBytes(out, 1, mapEntryOf("zone1-201", appendBytes(nil, 2, b)))
	}
	var s vdiffShowResponse
	require.NoError(t, s.unmarshal(resp(qr(row("completed", "t", "10", "0", `{"MismatchedRows":0}`)), qr(row("started", "t", "3", "0", "")))))
	got, err := summarize(s)
	require.NoError(t, err)
	require.False(t, got.Done)
	require.Equal(t, int64(13), got.Rows)

	s = vdiffShowResponse{}
	require.NoError(t, s.unmarshal(resp(qr(row("completed", "t", "10", "0", `{"ExtraRowsTarget":2}`)), qr(row("completed", "u", "3", "1", "")))))
	got, err = summarize(s)
	require.NoError(t, err)
	require.True(t, got.Done)
	require.Equal(t, []string{"t", "u"}, got.Mismatch)
}

// TestShardAndVSchemaDecode: GetShard's primary and serving flag; GetVSchema's tables with
// their first column vindex's name.
func TestShardAndVSchemaDecode(t *testing.T) {
	shard := appendBytes(nil, 1, tabletAlias{cell: "zone1", uid: 100}.marshal())
	shard = appendVarint(shard, 7, 1)
	var gs getShardResponse
	require.NoError(t, gs.unmarshal(appendBytes(nil, 1, appendBytes(appendString(nil, 1, "rs"), 3, shard))))
	require.Equal(t, getShardResponse{primary: &tabletAlias{cell: "zone1", uid: 100}, serving: true}, gs)

	ks := appendVarint(nil, 1, 1)
	ks = appendBytes(ks, 2, mapEntryOf("h", appendString(nil, 1, "hash")))
	cv := func(col, name string) []byte { return appendString(appendString(nil, 1, col), 2, name) }
	ks = appendBytes(ks, 3, mapEntryOf("t", appendBytes(appendBytes(nil, 2, cv("id", "h")), 2, cv("x", "other"))))
	ks = appendBytes(ks, 3, mapEntryOf("r", appendString(nil, 1, "reference")))
	var vs getVSchemaResponse
	require.NoError(t, vs.unmarshal(appendBytes(nil, 1, ks)))
	require.True(t, vs.sharded)
	require.Equal(t, map[string]string{"h": "hash"}, vs.vindexes)
	require.Equal(t, map[string][2]string{"t": {"", "h"}, "r": {"reference", ""}}, vs.tables)
}
