package refrouter

import "context"

// BarrierSQL exposes barrierSQL to BenchmarkBarrierVisible.
var BarrierSQL = barrierSQL

// OpenIdleSessions opens one session in each of the router's pools and leaves it idle, as
// a statement routed before a PAUSE and run after the Pause's reset does.
func (r *Router) OpenIdleSessions(ctx context.Context) error {
	r.mu.Lock()
	pools := make([]*pool, 0, len(r.pools))
	for _, p := range r.pools {
		pools = append(pools, p)
	}
	r.mu.Unlock()
	for _, p := range pools {
		c, err := p.p.Acquire(ctx)
		if err != nil {
			return err
		}
		c.Release()
	}
	return nil
}
