package detsim

// Hooks for the external tests.
var (
	AppendLabel = appendLabel
	Ddmin       = ddmin[int]
)
