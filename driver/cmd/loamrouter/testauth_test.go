package main

import (
	"net/http"
	"os"
	"testing"

	"loam.dev/router/adapters/httpstore"
)

// The tests' credentials: an operator and a controller token, made up for the tests (they
// guard only servers on 127.0.0.1 that live as long as a test).
const (
	testOpsToken = "test-operator-token-0123456789"
	testCtlToken = "test-controller-token-012345678"
)

// testAuth is the [[credentials]] block of every test config whose daemon or store server
// listens; it goes at the end of the file (after it, keys would belong to the table).
const testAuth = `
[[credentials]]
name = "test-ops"
role = "operator"
token_env = "LOAM_TEST_OPS_TOKEN"

[[credentials]]
name = "test-ctl"
role = "controller"
token_env = "LOAM_TEST_CTL_TOKEN"
`

// setTestTokens puts the tokens of testAuth in the environment (child processes inherit it).
func setTestTokens(t *testing.T) {
	t.Setenv("LOAM_TEST_OPS_TOKEN", testOpsToken)
	t.Setenv("LOAM_TEST_CTL_TOKEN", testCtlToken)
}

// opsClient is an operator's client of a store server or daemon.
func opsClient(t *testing.T, url string) *httpstore.Client {
	t.Helper()
	c, err := httpstore.Dial(url, &httpstore.Options{Token: testOpsToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// withOpsToken adds the operator's token to a request.
func withOpsToken(r *http.Request) *http.Request {
	tok := os.Getenv("LOAM_TEST_OPS_TOKEN")
	if tok == "" {
		tok = testOpsToken
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}
