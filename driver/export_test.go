package driver

import "context"

// AuditStep is what Run calls on an Audited executor between a step's save and its
// commands, for the tests that write a step's exec entries without a run.
func AuditStep[In, Cmd any](x *Audited[In, Cmd], ctx context.Context, cmds []Cmd) {
	x.auditStep(ctx, cmds)
}
