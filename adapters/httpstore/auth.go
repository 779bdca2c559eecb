package httpstore

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Role is what a credential may do; the server's Authorize decides what each role may
// touch (loamrouter: an operator changes records and asks for cutovers and failovers, a
// controller also writes machine snapshots and the lease).
type Role string

// The roles loamrouter gives its credentials.
const (
	RoleOperator   Role = "operator"
	RoleController Role = "controller"
)

// Credential is one identity a server accepts: a bearer token, or a verified client
// certificate whose subject common name is CertCN (mTLS). Name is who the audit log says
// acted.
type Credential struct {
	Name   string
	Role   Role
	Token  string
	CertCN string
}

// Identity is the caller a request was authenticated as.
type Identity struct {
	Name string
	Role Role
}

func (id Identity) String() string { return id.Name + " (" + string(id.Role) + ")" }

// Errors a client gets back for a request the server refused before running it.
var (
	// ErrUnauthenticated: no credential, or a wrong one.
	ErrUnauthenticated = errors.New("httpstore: not authenticated")
	// ErrForbidden: the credential's role may not make this call, or the request was
	// refused as coming from a browser (Origin) or for another host (Host).
	ErrForbidden = errors.New("httpstore: forbidden")
	// ErrTooLarge: a request or an answer larger than its bound.
	ErrTooLarge = errors.New("httpstore: too large")
	// ErrBusy: the server is at its cap of concurrent calls; try again.
	ErrBusy = errors.New("httpstore: server busy")
)

type identityKey struct{}

// IdentityFrom returns the identity Authenticate put in a request's context.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// authenticator matches requests to credentials.
type authenticator struct {
	creds []Credential
	// sums are the SHA-256 of each token: comparing fixed-size digests in constant time
	// leaks neither a token's bytes nor its length.
	sums  [][32]byte
	hosts map[string]bool // allowed Host headers; empty allows any
	local *Identity
}

func newAuthenticator(opts *Options) *authenticator {
	a := &authenticator{}
	if opts == nil {
		return a
	}
	a.local = opts.Local
	for _, c := range opts.Credentials {
		a.creds = append(a.creds, c)
		a.sums = append(a.sums, sha256.Sum256([]byte(c.Token)))
	}
	if len(opts.Hosts) > 0 {
		a.hosts = map[string]bool{}
		for _, h := range opts.Hosts {
			a.hosts[strings.ToLower(h)] = true
		}
	}
	return a
}

// refusal is a request refused before it ran: its status, sentinel and message.
type refusal struct {
	status int
	kind   string
	msg    string
}

// check runs the browser defences and authentication; it returns the caller or why not.
func (a *authenticator) check(r *http.Request) (Identity, *refusal) {
	if o := r.Header.Get("Origin"); o != "" {
		return Identity{}, &refusal{http.StatusForbidden, kindForbidden,
			fmt.Sprintf("httpstore: a request with an Origin header (%q) is refused: this API is not for browsers (a page could otherwise drive it from a user's machine)", o)}
	}
	if a.hosts != nil && !a.hosts[strings.ToLower(r.Host)] {
		return Identity{}, &refusal{http.StatusForbidden, kindForbidden,
			fmt.Sprintf("httpstore: Host %q is not a name this server listens as (a DNS-rebinding defence); use one of its configured addresses or add the name to its hosts", r.Host)}
	}
	if r.URL.RawQuery != "" {
		return Identity{}, &refusal{http.StatusBadRequest, kindBadRequest,
			"httpstore: this API takes no query string, and credentials are never accepted in a URL (they end up in logs and proxies); send Authorization: Bearer <token>"}
	}
	if a.local != nil {
		return *a.local, nil
	}
	if len(a.creds) == 0 {
		return Identity{}, &refusal{http.StatusUnauthorized, kindUnauthenticated,
			"httpstore: this server has no credentials configured and refuses every call"}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		cn := r.TLS.PeerCertificates[0].Subject.CommonName
		for _, c := range a.creds {
			if c.CertCN != "" && c.CertCN == cn {
				return Identity{Name: c.Name, Role: c.Role}, nil
			}
		}
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && got != "" {
		sum := sha256.Sum256([]byte(got))
		match := -1
		for i := range a.creds {
			// every credential is compared, so the time taken does not say which matched
			if a.creds[i].Token != "" && subtle.ConstantTimeCompare(sum[:], a.sums[i][:]) == 1 {
				match = i
			}
		}
		if match >= 0 {
			return Identity{Name: a.creds[match].Name, Role: a.creds[match].Role}, nil
		}
	}
	return Identity{}, &refusal{http.StatusUnauthorized, kindUnauthenticated,
		"httpstore: missing or wrong credential: send Authorization: Bearer <token> with a token the server is configured with (or a client certificate it trusts)"}
}

// Authenticate runs next only for requests that pass the browser defences (no Origin
// header, a Host the server listens as) and carry a credential of opts; the caller's
// Identity is in the request's context (IdentityFrom). It guards endpoints other than the
// store API (loamrouter's /status).
func Authenticate(opts *Options, next http.Handler) http.Handler {
	a := newAuthenticator(opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ref := a.check(r)
		if ref != nil {
			writeRefusal(w, ref)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

func writeRefusal(w http.ResponseWriter, ref *refusal) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ref.status)
	writeBody(w, &response{Error: &wireError{Kind: ref.kind, Message: ref.msg}})
}

// LoopbackHosts lists the Host values a client may send to a server on addr
// ("127.0.0.1:9464"): the address itself and, for a loopback address, localhost and the
// other loopback spellings with the same port. A wildcard bind ("0.0.0.0:9464", ":9464")
// lists nothing: the names clients use must then be configured.
func LoopbackHosts(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	if host == "" || (ip != nil && ip.IsUnspecified()) {
		return nil
	}
	out := []string{addr}
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		for _, h := range []string{"localhost", "127.0.0.1", "[::1]"} {
			out = append(out, h+":"+port)
		}
	}
	return out
}

// IsLoopback reports whether a listen address binds only a loopback interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
