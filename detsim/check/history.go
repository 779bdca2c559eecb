package check

import (
	"errors"
	"fmt"
	"strings"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

// Outcome is what a client learned about its operation.
type Outcome uint8

const (
	// Pending: no answer yet (at the end of a run: never answered, so it may have applied).
	Pending Outcome = iota
	// OK: acknowledged; it applied.
	OK
	// Failed: a definite refusal; it did not apply (login refused, connection refused,
	// database paused or unknown, 2PC aborted and rolled back).
	Failed
	// Unknown: a timeout, a reset, or a session ended under it: it may have applied.
	Unknown
)

var outcomeNames = []string{"pending", "ok", "failed", "unknown"}

func (o Outcome) String() string { return outcomeNames[o] }

// MayHaveApplied is true for every outcome but Failed.
func (o Outcome) MayHaveApplied() bool { return o != Failed }

// Classify maps a client's error to an outcome. Only refusals that happen before anything
// runs are definite; everything else is "may have applied", never an error of the system
// under test.
func Classify(err error) Outcome {
	if err == nil {
		return OK
	}
	var be *adapters.BackendError
	var re *adapters.RouterError
	var refused *detsim.RefusedError
	switch {
	case errors.Is(err, detsim.ErrIndeterminate):
		return Unknown
	case errors.As(err, &refused), errors.Is(err, model.ErrAborted):
		return Failed
	case errors.As(err, &be):
		if be.Code == model.CodeLoginRefused {
			return Failed
		}
		return Unknown // 57P01 and the rest: the session ended under the transaction
	case errors.As(err, &re):
		return Failed
	}
	return Unknown
}

// Op is one client operation in the history.
type Op struct {
	ID       int64
	Client   string
	Via      string // the router instance it went through
	Kind     string // "txn" or "transfer"
	Txn      model.Txn
	Invoke   int64
	Complete int64
	Outcome  Outcome
	Err      string
	// Code is the backend's SQLSTATE when the error carried one, Backend the backend.
	Code    string
	Backend string
	Reads   [][]int64
	// Transfer is set for Kind "transfer".
	Transfer *Transfer
}

// Transfer is a bank transfer.
type Transfer struct {
	From, To string
	Amount   int64
}

func (o *Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "op %d %s via %s [%d,%d] %s", o.ID, o.Client, o.Via, o.Invoke, o.Complete, o.Outcome)
	if o.Transfer != nil {
		fmt.Fprintf(&b, " transfer %s->%s %d", o.Transfer.From, o.Transfer.To, o.Transfer.Amount)
	}
	for _, op := range o.Txn.Ops {
		fmt.Fprintf(&b, " %s(%s,%d)", op.Kind, op.Key, op.Value)
	}
	if o.Err != "" {
		fmt.Fprintf(&b, " err=%q", o.Err)
	}
	return b.String()
}

// History is every client operation of a run, in invocation order.
type History struct {
	Ops []*Op
}

// Invoke records the start of an operation and returns it, to be completed later.
func (h *History) Invoke(op *Op) *Op {
	h.Ops = append(h.Ops, op)
	return op
}

// Complete records an operation's answer.
func Complete(op *Op, now int64, reads [][]int64, err error) {
	op.Complete = now
	op.Outcome = Classify(err)
	op.Reads = reads
	if err != nil {
		op.Err = err.Error()
		var be *adapters.BackendError
		if errors.As(err, &be) {
			op.Code, op.Backend = be.Code, be.Backend
		}
	}
}
