package lsn_test

import (
	"fmt"

	"loam.dev/router/kernel/lsn"
)

// A frontend's write completed on the primary at t=1000 ms. The requirement for a causal read
// is the position of the first poll of that primary sent strictly after 1000; a standby may
// serve the read once its latest replay position reaches it.
func Example() {
	primary := lsn.Endpoint{Host: "10.0.0.1", Port: 5432}
	standby := lsn.Endpoint{Host: "10.0.0.2", Port: 5432}
	hs := lsn.NewHistories(lsn.DefaultWindow)

	_ = hs.Record(primary, lsn.Observed(995, lsn.MustParse("16/B374D000")))
	_ = hs.Record(primary, lsn.Observed(1005, lsn.MustParse("16/B374D848")))
	_ = hs.Record(standby, lsn.Observed(1006, lsn.MustParse("16/B374D000")))

	req, _ := hs.After(primary, 1000)
	fmt.Println("requirement", req.LSN, "reached:", hs.Reached(standby, req.LSN))

	_ = hs.Record(standby, lsn.Observed(1016, lsn.MustParse("16/B374D848")))
	fmt.Println("reached:", hs.Reached(standby, req.LSN))
	for _, r := range hs.Rows() {
		fmt.Println(r)
	}
	// Output:
	// requirement 16/B374D848 reached: false
	// reached: true
	// 10.0.0.1	5432	16/B374D848
	// 10.0.0.2	5432	16/B374D848
}

// Parse accepts what the server prints and what it accepts as input.
func ExampleParse() {
	l, err := lsn.Parse("0/00000001")
	fmt.Println(l, err)
	_, err = lsn.Parse(" 0/1")
	fmt.Println(err)
	// Output:
	// 0/1 <nil>
	// lsn: invalid pg_lsn syntax: " 0/1" is not a WAL position (want two hexadecimal halves of 1 to 8 digits separated by "/", like 16/B374D848)
}

// After pg_switch_wal an idle primary reports its insert position past the next segment's long
// page header; the standby reports the segment boundary.
func ExampleWALLayout_InsertProgress() {
	fmt.Println(lsn.DefaultWAL.InsertProgress(lsn.MustParse("0/4000028")))
	// Output: 0/4000000
}
