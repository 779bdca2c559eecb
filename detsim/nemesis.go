package detsim

import "slices"

// OnNemesis registers what a nemesis fault point does when it fires on a tick. Registering
// a point twice replaces its action.
func (s *Sim) OnNemesis(point string, act func()) {
	if _, ok := catalogueIndex[point]; !ok {
		panic("detsim: nemesis action for uncatalogued point " + point)
	}
	if !Catalogue[catalogueIndex[point]].Nemesis {
		panic("detsim: point " + point + " is evaluated inline, not by the nemesis")
	}
	if s.nemesis == nil {
		s.nemesis = map[string]func(){}
	}
	s.nemesis[point] = act
}

// OnHeal registers what to do when the fault window closes: restart crashed nodes, let
// the controller catch up. Hooks run in registration order.
func (s *Sim) OnHeal(f func()) { s.healHooks = append(s.healHooks, f) }

// StartNemesis starts the nemesis tick: every NemesisEvery ms until the fault window
// closes, each registered nemesis point (in catalogue order) is evaluated and its action
// runs if it fires. The network's own points (partition, slow, reset) are registered here.
// When the window closes the run heals: partitions and slow links go, heal hooks run.
// Exploring, the points are evaluated after every step instead, and nothing heals.
func (s *Sim) StartNemesis() {
	s.registerNetNemesis()
	points := make([]string, 0, len(s.nemesis))
	for _, p := range Catalogue {
		if _, ok := s.nemesis[p.Name]; ok {
			points = append(points, p.Name)
		}
	}
	if s.tape != nil {
		// Exploring: no tick (its phase would make equal states differ); a fault may land
		// after any step instead, while the budget lasts.
		s.afterStep = func() {
			for _, p := range points {
				if s.Fault(p) {
					s.nemesis[p]()
				}
			}
		}
		return
	}
	var tick func()
	tick = func() {
		if s.now >= s.opts.Net.FaultWindow {
			s.Heal()
			for _, h := range s.healHooks {
				h()
			}
			return
		}
		for _, p := range points {
			if s.Fault(p) {
				s.nemesis[p]()
			}
		}
		s.After(s.opts.Net.NemesisEvery, Label{Kind: "nemesis"}, tick)
	}
	s.After(s.opts.Net.NemesisEvery, Label{Kind: "nemesis"}, tick)
}

func (s *Sim) registerNetNemesis() {
	n := s.Net
	pair := func() (NodeID, NodeID, bool) {
		if len(n.nodes) < 2 {
			return 0, 0, false
		}
		a := NodeID(s.Intn(len(n.nodes)))
		b := NodeID(s.Intn(len(n.nodes) - 1))
		if b >= a {
			b++
		}
		return a, b, true
	}
	s.OnNemesis("net.partition", func() {
		a, b, ok := pair()
		if !ok {
			return
		}
		mode := s.Intn(3) // 0 symmetric, 1 a→b only, 2 b→a only
		if mode != 2 {
			n.Cut(a, b)
		}
		if mode != 1 {
			n.Cut(b, a)
		}
		s.Probe("net.partition." + []string{"symmetric", "asymmetric", "asymmetric"}[mode])
		s.After(s.Between(500, 10_000), Label{Kind: "heal-partition", From: n.nodes[a].name, To: n.nodes[b].name}, func() {
			if !s.healed {
				n.Mend(a, b)
				n.Mend(b, a)
			}
		})
	})
	s.OnNemesis("net.slow", func() {
		a, b, ok := pair()
		if !ok {
			return
		}
		n.Slow(a, b, s.Between(10, 50))
		s.After(s.Between(500, 10_000), Label{Kind: "heal-slow", From: n.nodes[a].name, To: n.nodes[b].name}, func() {
			if !s.healed {
				n.Slow(a, b, 1)
			}
		})
	})
	s.OnNemesis("net.reset", func() {
		c, ok := n.randomInflight()
		if !ok {
			return
		}
		if n.Reset(c.from, c.to) > 0 {
			s.Probe("net.reset.inflight")
		}
	})
}

// nemesisPoints lists the registered nemesis points, sorted, for tests.
func (s *Sim) nemesisPoints() []string {
	var out []string
	for p := range s.nemesis {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
