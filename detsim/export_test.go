package detsim

// Hooks for the external tests.
var (
	AppendLabel     = appendLabel
	AppendSpecEvent = appendSpecEvent
	Ddmin           = ddmin[int]
)
