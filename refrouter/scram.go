package refrouter

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677), as Postgres and PgDog (its
// default auth_type) ask it of a client: the password never crosses the wire, and a
// client that does not know it cannot log in. Channel binding is not offered (the
// reference router serves no TLS, on loopback only).

const scramMechanism = "SCRAM-SHA-256"

// scramIterations is the PBKDF2 count of the salted password (Postgres's default).
const scramIterations = 4096

// errAuth is a refused login; the client is told only that authentication failed.
var errAuth = errors.New("password authentication failed")

// clientFirst is the client-first-message: its GS2 header and the bare part the proof
// signs.
type clientFirst struct {
	gs2   string // "n,," (or "y,,": the client could bind but thinks the server cannot)
	bare  string // n=<user>,r=<nonce>[,extensions]
	nonce string
}

// parseClientFirst reads a client-first-message. Channel binding ("p=") and an
// authorization identity are refused: neither is offered.
func parseClientFirst(data []byte) (clientFirst, error) {
	s := string(data)
	bad := func(why string) (clientFirst, error) {
		return clientFirst{}, fmt.Errorf("SCRAM client-first-message: %s", why)
	}
	var gs2 string
	switch {
	case strings.HasPrefix(s, "n,,"), strings.HasPrefix(s, "y,,"):
		gs2 = s[:3]
	case strings.HasPrefix(s, "p="):
		return bad("channel binding was not offered")
	default:
		return bad("want a GS2 header n,, or y,, (no authorization identity)")
	}
	bare := s[3:]
	parts := strings.Split(bare, ",")
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "n=") || !strings.HasPrefix(parts[1], "r=") {
		return bad("want n=<user>,r=<nonce>")
	}
	nonce := parts[1][2:]
	if !printableNonce(nonce) {
		return bad("the nonce must be printable ASCII without commas")
	}
	return clientFirst{gs2: gs2, bare: bare, nonce: nonce}, nil
}

func printableNonce(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// clientFinal is the client-final-message.
type clientFinal struct {
	withoutProof string // c=<binding>,r=<nonce>: what the proof signs
	binding      []byte // the decoded c= value: the GS2 header again
	nonce        string
	proof        []byte
}

// parseClientFinal reads a client-final-message: c=...,r=...[,extensions],p=<proof>.
func parseClientFinal(data []byte) (clientFinal, error) {
	s := string(data)
	bad := func(why string) (clientFinal, error) {
		return clientFinal{}, fmt.Errorf("SCRAM client-final-message: %s", why)
	}
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return bad("no proof (p=)")
	}
	withoutProof, proofText := s[:i], s[i+3:]
	parts := strings.Split(withoutProof, ",")
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "c=") || !strings.HasPrefix(parts[1], "r=") {
		return bad("want c=<binding>,r=<nonce> before the proof")
	}
	binding, err := base64.StdEncoding.DecodeString(parts[0][2:])
	if err != nil {
		return bad("c= is not base64")
	}
	proof, err := base64.StdEncoding.DecodeString(proofText)
	if err != nil || len(proof) != sha256.Size {
		return bad("p= is not a base64 SHA-256 proof")
	}
	return clientFinal{withoutProof: withoutProof, binding: binding, nonce: parts[1][2:], proof: proof}, nil
}

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// scramLogin runs the SCRAM-SHA-256 exchange on b for password, up to and excluding
// AuthenticationOk. A wrong proof is errAuth; a malformed message is an error naming it.
func scramLogin(b *pgproto3.Backend, password string) error {
	b.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{scramMechanism}})
	if err := b.Flush(); err != nil {
		return err
	}
	if err := b.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return err
	}
	msg, err := b.Receive()
	if err != nil {
		return err
	}
	init, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok || init.AuthMechanism != scramMechanism {
		return fmt.Errorf("want a SASLInitialResponse for %s, got %T", scramMechanism, msg)
	}
	first, err := parseClientFirst(init.Data)
	if err != nil {
		return err
	}
	var salt, snonce [18]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return err
	}
	if _, err := rand.Read(snonce[:]); err != nil {
		return err
	}
	nonce := first.nonce + base64.RawStdEncoding.EncodeToString(snonce[:])
	serverFirst := fmt.Sprintf("r=%s,s=%s,i=%d", nonce, base64.StdEncoding.EncodeToString(salt[:]), scramIterations)
	b.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(serverFirst)})
	if err := b.Flush(); err != nil {
		return err
	}
	if err := b.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return err
	}
	if msg, err = b.Receive(); err != nil {
		return err
	}
	resp, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		return fmt.Errorf("want a SASLResponse, got %T", msg)
	}
	final, err := parseClientFinal(resp.Data)
	if err != nil {
		return err
	}
	if final.nonce != nonce || !bytes.Equal(final.binding, []byte(first.gs2)) {
		return errAuth
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt[:], scramIterations, sha256.Size)
	if err != nil {
		return err
	}
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	authMessage := first.bare + "," + serverFirst + "," + final.withoutProof
	sig := hmacSHA256(stored[:], authMessage)
	got := make([]byte, sha256.Size)
	for i := range got {
		got[i] = final.proof[i] ^ sig[i]
	}
	gotStored := sha256.Sum256(got)
	if subtle.ConstantTimeCompare(gotStored[:], stored[:]) != 1 {
		return errAuth
	}
	serverSig := hmacSHA256(hmacSHA256(salted, "Server Key"), authMessage)
	b.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte("v=" + base64.StdEncoding.EncodeToString(serverSig))})
	return nil
}
