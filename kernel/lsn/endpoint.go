package lsn

import (
	"cmp"
	"strconv"
	"strings"
)

// Endpoint is a physical Postgres server: the identity under which its progress is sampled,
// retained and reported. Two hostgroup memberships with the same host and port are one
// endpoint. Host is compared as written: "localhost" and "127.0.0.1" are different endpoints,
// so configure each server under one name.
type Endpoint struct {
	Host string
	Port uint16
}

// String formats the endpoint as host:port, bracketing an IPv6 literal.
func (e Endpoint) String() string {
	p := strconv.FormatUint(uint64(e.Port), 10)
	if strings.Contains(e.Host, ":") {
		return "[" + e.Host + "]:" + p
	}
	return e.Host + ":" + p
}

// Compare orders endpoints by host, then port (the order of Histories.Rows).
func (e Endpoint) Compare(o Endpoint) int {
	if c := strings.Compare(e.Host, o.Host); c != 0 {
		return c
	}
	return cmp.Compare(e.Port, o.Port)
}
