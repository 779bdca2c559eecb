package conformance

import "context"

// TB is what a contract case needs from its test. *testing.T satisfies it; so does the
// recording TB the mutant tests use to watch a case fail.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
	Cleanup(func())
	Context() context.Context
	Name() string
}
