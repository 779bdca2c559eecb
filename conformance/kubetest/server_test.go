package kubetest_test

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/kubetest"
)

var kube = kubetest.NewShared("nobody")

func TestMain(m *testing.M) {
	code := m.Run()
	kube.Close()
	os.Exit(code)
}

// TestRealServerAuthenticates: the API server answers only callers with a token from the
// token file over TLS; a user with a token but no Role binding is forbidden (RBAC is on),
// the admin (system:masters) is allowed.
func TestRealServerAuthenticates(t *testing.T) {
	srv := kube.Get(t)
	tc, err := srv.TLSConfig()
	require.NoError(t, err)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
	get := func(path, token string) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	const cms = "/api/v1/namespaces/default/configmaps"
	require.Equal(t, http.StatusUnauthorized, get(cms, ""), "anonymous")
	require.Equal(t, http.StatusUnauthorized, get(cms, "not-a-token"))
	require.Equal(t, http.StatusForbidden, get(cms, srv.Token(t, "nobody")))
	require.Equal(t, http.StatusOK, get(cms, srv.Token(t, "")))

}

// TestSkipsWithoutBinaries: without KUBE_BIN, BinDir says what to set.
func TestSkipsWithoutBinaries(t *testing.T) {
	t.Setenv(kubetest.EnvKubeBin, "")
	_, err := kubetest.BinDir()
	require.ErrorIs(t, err, kubetest.ErrNoBinaries)
	require.ErrorContains(t, err, "KUBE_BIN")
	t.Setenv(kubetest.EnvKubeBin, t.TempDir())
	_, err = kubetest.BinDir()
	require.ErrorIs(t, err, kubetest.ErrNoBinaries)
}
