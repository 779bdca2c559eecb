package refrouter_test

import (
	"os"
	"testing"

	"loam.dev/router/conformance/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.RemoveTemplate()
	os.Exit(code)
}
