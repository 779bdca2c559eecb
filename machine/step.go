package machine

// Steps is the skeleton shared by the machines that run one command at a time through
// stages (failover, vreshard): after a restart they say so and send the stage's command
// again, or wait out the retry that was due; at the end they say how it ended. Spec names
// the machine's spec and Restart and Done its actions for those two moments.
type Steps struct {
	Spec, Restart, Done string
}

// Resume is a sequential machine's answer to Restarted (after Restore) while a stage is
// under way: it emits Restart with the stage's name, then sends the stage's command again
// when it was out and unanswered (sent: the answer may be lost with the old process), or
// re-arms the retry timer that was waiting (retryAt, 0 when none was), or does nothing (the
// stage waits for an input a restart does not lose).
func (s Steps) Resume(ctx *Ctx, stage string, sent bool, retryAt int64, send func(), arm func(at int64)) {
	ctx.Emit(s.Spec, s.Restart, S("stage", stage))
	switch {
	case sent:
		send()
	case retryAt != 0:
		arm(retryAt)
	}
}

// End emits Done with the outcome and the generation of the last record known stored.
func (s Steps) End(ctx *Ctx, outcome string, gen uint64) {
	ctx.Emit(s.Spec, s.Done, S("outcome", outcome), U("gen", gen))
}
