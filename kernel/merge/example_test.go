package merge_test

import (
	"fmt"
	"math/big"
	"os"
	"strings"

	"loam.dev/router/kernel/merge"
)

// Two shards answered SELECT id, name … ORDER BY name DESC, id LIMIT 3 OFFSET 1 with
// LIMIT 4 each (Limit.PerShard); the merge keeps the stable order and drops the rest.
func ExampleMerge() {
	by := merge.OrderBy{{Col: 1, Desc: true}, {Col: 0}}
	lim := merge.Limit{Count: 3, Offset: 1}
	fmt.Println("ask each shard for:", lim.PerShard())
	shards := [][]merge.Row{
		{{merge.Int(1), merge.Null()}, {merge.Int(4), merge.Text("b")}, {merge.Int(2), merge.Text("a")}},
		{{merge.Int(3), merge.Text("b")}, {merge.Int(5), merge.Text("B")}},
	}
	res, err := merge.Merge(shards, by, lim)
	if err != nil {
		panic(err)
	}
	for i, row := range res.Rows {
		fmt.Println(row, "from shard", res.From[i])
	}
	// Output:
	// ask each shard for: LIMIT 4
	// [3 "b"] from shard 1
	// [4 "b"] from shard 0
	// [2 "a"] from shard 0
}

// COUNT(DISTINCT) cannot be computed from per-shard results.
func ExampleDecompose_notDecomposable() {
	_, err := merge.Decompose(merge.Aggregation{Aggs: []merge.Agg{{Func: merge.Count, Col: 2, Distinct: true}}})
	fmt.Println(err)
	// Output:
	// merge: aggs[0]: count(distinct) is not decomposable: a value present on two shards must count once, and per-shard results cannot tell; run it on one node or rewrite the query
}

// SELECT region, count(*), avg(amount) … GROUP BY region across two shards: each shard runs the
// partial query, Combine adds the partials up and divides as Postgres does.
func ExamplePlan_Combine() {
	plan, err := merge.Decompose(merge.Aggregation{
		GroupBy: []int{0},
		Aggs:    []merge.Agg{{Func: merge.CountStar}, {Func: merge.Avg, Col: 1}},
	})
	if err != nil {
		panic(err)
	}
	cols := []string{"region", "amount"}
	sel, group := plan.ShardSelect(func(i int) string { return cols[i] })
	fmt.Printf("each shard: SELECT %s FROM t GROUP BY %s\n", strings.Join(sel, ", "), strings.Join(group, ", "))
	rows, err := plan.Combine([][]merge.Row{
		{{merge.Text("eu"), merge.Int(2), merge.Int(3), merge.Int(2)}},
		{{merge.Text("eu"), merge.Int(1), merge.Int(1), merge.Int(1)}, {merge.Null(), merge.Int(1), merge.Null(), merge.Int(0)}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(rows)
	// Output:
	// each shard: SELECT region, count(*), sum(amount), count(amount) FROM t GROUP BY region
	// [["eu" 3 1.3333333333333333] [null 1 null]]
}

// Aggregate runs the whole decomposition over raw rows; SUM(int8) does not overflow, as
// Postgres's numeric result does not.
func ExampleAggregate() {
	big := merge.Int(9223372036854775807)
	rows, _, err := merge.Aggregate(
		merge.Aggregation{Aggs: []merge.Agg{{Func: merge.Sum, Col: 0}, {Func: merge.Avg, Col: 0}, {Func: merge.Min, Col: 0}}},
		[][]merge.Row{{{big}}, {{big}, {merge.Null()}}, {}},
	)
	if err != nil {
		panic(err)
	}
	fmt.Println(rows)
	// Output:
	// [[18446744073709551614 9223372036854775807 9223372036854775807]]
}

func ExampleCheckPartition() {
	r := func(lo, hi int64) merge.Span { return merge.Span{Lo: big.NewInt(lo), Hi: big.NewInt(hi)} }
	f, err := merge.CheckPartition(r(0, 100), [][]merge.Span{{r(0, 30), r(60, 100)}, {r(30, 55)}})
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Partition, f.At, f.Owners)
	// Output:
	// false 55 []
}

func ExampleCheckModulus() {
	n := func(x int64) *big.Int { return big.NewInt(x) }
	f, _ := merge.CheckModulus(n(4), [][]*big.Int{{n(0), n(2)}, {n(1), n(3)}})
	fmt.Println(f.Partition)
	f, _ = merge.CheckModulus(n(4), [][]*big.Int{{n(0), n(2)}, {n(2), n(3)}})
	fmt.Println(f.Partition, f.At, f.Owners)
	// Output:
	// true
	// false 1 []
}

func ExampleServe() {
	in := strings.NewReader(`{"op":"merge","order":[{"col":0}],"limit":1,"shards":[[[2]],[[1],[3]]]}
{"op":"partition_check","modulus":2,"parts":[[0],[1]]}
{"op":"aggregate","aggs":[{"fn":"string_agg","col":0}],"input":"rows","shards":[]}
`)
	if err := merge.Serve(in, os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// {"ok":true,"rows":[[1]],"from":[1],"shard_limit":1}
	// {"ok":true,"partition":true}
	// {"ok":false,"kind":"not_decomposable","field":"aggs[0]","error":"merge: aggs[0]: string_agg is not decomposable: its result depends on the order rows arrive across shards; run it on one node or rewrite the query"}
}

func ExampleRespond() {
	fmt.Print(string(merge.Respond(nil, []byte(`{"op":"merge","order":[{"col":0,"nulls":"sideways"}],"shards":[]}`))))
	// Output:
	// {"ok":false,"kind":"bad_request","field":"order[0].nulls","error":"merge: order[0].nulls: \"sideways\" is not first or last (leave it out for Postgres's default)"}
}

func ExampleParseDecimal() {
	a, _ := merge.ParseDecimal("1.50")
	b, _ := merge.ParseDecimal("1.5")
	fmt.Println(a, b, merge.Compare(a, b), a == b)
	// Output:
	// 1.50 1.5 0 false
}

func ExampleCompare() {
	fmt.Println(merge.Compare(merge.Text("B"), merge.Text("a")), merge.Compare(merge.Null(), merge.Int(1)))
	// Output:
	// -1 1
}

// A driver of a differential test encodes one request and sends the same line to this package
// and to another implementation of the protocol (the proved oracle in proof/), then compares the answers.
func ExampleAppendRequest() {
	req := &merge.MergeRequest{
		Order:  merge.OrderBy{{Col: 0, Desc: true, Nulls: merge.NullsLast}},
		Limit:  merge.Limit{Count: 1},
		Shards: [][]merge.Row{{{merge.Null()}}, {{merge.Int(7)}}},
	}
	line := merge.AppendRequest(nil, req)
	fmt.Print(string(line))
	fmt.Print(string(merge.Respond(nil, line)))
	// Output:
	// {"op":"merge","order":[{"col":0,"dir":"desc","nulls":"last"}],"limit":1,"shards":[[[null]],[[7]]]}
	// {"ok":true,"rows":[[7]],"from":[1],"shard_limit":1}
}

// ShardRows is the shard side of a plan: what SELECT g, count(*), sum(x) … GROUP BY g returns
// on one shard's rows.
func ExamplePlan_ShardRows() {
	plan, _ := merge.Decompose(merge.Aggregation{GroupBy: []int{0}, Aggs: []merge.Agg{{Func: merge.CountStar}, {Func: merge.Sum, Col: 1}}})
	rows, _ := plan.ShardRows([]merge.Row{
		{merge.Text("b"), merge.Int(2)}, {merge.Text("a"), merge.Null()}, {merge.Text("b"), merge.Int(3)},
	})
	fmt.Println(rows)
	// Output:
	// [["a" 1 null] ["b" 2 5]]
}
