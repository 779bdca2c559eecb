package refrouter

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSCRAMMessages: the parsers of the two client SCRAM messages never panic, and what
// they accept is consistent: a client-first's bare part follows its GS2 header, its nonce
// is printable; a client-final's proof is a SHA-256 and the signed part precedes it.
func FuzzSCRAMMessages(f *testing.F) {
	f.Add([]byte("n,,n=,r=abcdef"), []byte("c=biws,r=abcdefXYZ,p="+base64.StdEncoding.EncodeToString(make([]byte, 32))))
	f.Add([]byte("p=tls-server-end-point,,n=,r=x"), []byte("c=biws,r=x"))
	f.Add([]byte("y,,n=u,r=a,b"), []byte("c=,r=,p=,p="))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		if c, err := parseClientFirst(first); err == nil {
			require.True(t, bytes.HasPrefix(first, []byte(c.gs2)))
			require.Equal(t, string(first[len(c.gs2):]), c.bare)
			require.True(t, printableNonce(c.nonce))
		}
		if c, err := parseClientFinal(final); err == nil {
			require.Len(t, c.proof, 32)
			require.True(t, bytes.HasPrefix(final, []byte(c.withoutProof+",p=")))
		}
	})
}
