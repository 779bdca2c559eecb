package controller

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"loam.dev/router/adapters/httpstore"
)

// minTokenLen is the shortest token accepted: 16 characters (openssl rand -hex 16 gives 32).
const minTokenLen = 16

// ReadToken reads the secret a token_env or token_file key names. key is the key's name
// for messages ("credentials[0].token_env"). A file must be readable by its owner only.
func ReadToken(key, env, file string) (string, string, error) {
	switch {
	case env != "" && file != "":
		return "", key + "_env", errors.New("give token_env or token_file, not both")
	case env != "":
		v := strings.TrimSpace(os.Getenv(env))
		if v == "" {
			return "", key + "_env", fmt.Errorf("the environment variable %s is empty or unset; export it (e.g. %s=$(openssl rand -hex 16)) or remove the key", env, env)
		}
		return v, key + "_env", nil
	case file != "":
		fi, err := os.Stat(file)
		if err != nil {
			return "", key + "_file", fmt.Errorf("%v (write the token to it, mode 0600)", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", key + "_file", fmt.Errorf("%s is readable by others (mode %v): a token file must be its owner's only; chmod 600 %s", file, fi.Mode().Perm(), file)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return "", key + "_file", err
		}
		v := strings.TrimSpace(string(data))
		if v == "" {
			return "", key + "_file", fmt.Errorf("%s is empty; write the token to it", file)
		}
		return v, key + "_file", nil
	}
	return "", "", nil
}

// checkSecurity validates [[credentials]], [tls] and the client tokens, reading every
// token once.
func (c *Config) checkSecurity(bad func(key, format string, a ...any) error) error {
	names := map[string]bool{}
	tokens := map[string]string{}
	for i := range c.Credentials {
		cr := &c.Credentials[i]
		at := fmt.Sprintf("credentials[%d]", i)
		if cr.Name == "" || names[cr.Name] {
			return bad(at+".name", "every credential needs a unique name: it is who the audit log says acted (got %q)", cr.Name)
		}
		names[cr.Name] = true
		switch httpstore.Role(cr.Role) {
		case httpstore.RoleOperator, httpstore.RoleController:
		default:
			return bad(at+".role", "%q is not a role; use \"operator\" (status, the record, requests, the audit log) or \"controller\" (also snapshots, the lease)", cr.Role)
		}
		tok, key, err := ReadToken(at+".token", cr.TokenEnv, cr.TokenFile)
		if err != nil {
			return bad(key, "%v", err)
		}
		switch {
		case tok == "" && cr.CertCN == "":
			return bad(at, "give the credential a token_env, a token_file or a cert_cn")
		case tok != "" && len(tok) < minTokenLen:
			return bad(key, "the token is %d characters; use at least %d (e.g. openssl rand -hex 16)", len(tok), minTokenLen)
		case cr.CertCN != "" && c.TLS.ClientCAFile == "":
			return bad(at+".cert_cn", "a certificate credential needs tls.client_ca_file, the authority that signs client certificates")
		}
		if tok != "" {
			if other, dup := tokens[tok]; dup {
				return bad(key, "the same token as credential %q: give every credential its own", other)
			}
			tokens[tok] = cr.Name
		}
		cr.token = tok
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return bad("tls", "give both cert_file and key_file (PEM) to serve TLS")
	}
	if c.TLS.ClientCAFile != "" && c.TLS.CertFile == "" {
		return bad("tls.client_ca_file", "client certificates need TLS: set tls.cert_file and tls.key_file")
	}
	if (c.TLS.ClientCertFile == "") != (c.TLS.ClientKeyFile == "") {
		return bad("tls", "give both client_cert_file and client_key_file to present a client certificate")
	}
	for _, k := range []struct{ key, env, file string }{
		{"controller.token", c.Controller.TokenEnv, c.Controller.TokenFile},
		{"store.token", c.Store.TokenEnv, c.Store.TokenFile},
	} {
		if _, key, err := ReadToken(k.key, k.env, k.file); err != nil {
			return bad(key, "%v", err)
		}
	}
	return nil
}

// AcceptedCredentials are the accepted credentials as the servers take them.
func (c *Config) AcceptedCredentials() []httpstore.Credential {
	out := make([]httpstore.Credential, 0, len(c.Credentials))
	for _, cr := range c.Credentials {
		out = append(out, httpstore.Credential{Name: cr.Name, Role: httpstore.Role(cr.Role), Token: cr.token, CertCN: cr.CertCN})
	}
	return out
}
