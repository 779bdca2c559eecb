package detsim

// Hooks for the external tests.
var (
	AppendLabel     = appendLabel
	AppendSpecEvent = appendSpecEvent
	Ddmin           = ddmin[int]
)

// RearmForTest moves a controller's timers after its Offset was changed by hand.
func RearmForTest(c *Controller) {
	for _, h := range c.hosts {
		h.rearm()
	}
}
