// Package kubetest starts a real Kubernetes API server for tests: etcd 3.6 and
// kube-apiserver 1.35, both built from their Go modules (the tools module in bin/), on
// 127.0.0.1 in a temporary directory, and stops them when the test binary is done.
//
// The server is set up the way a cluster's is, minus the nodes: bearer-token
// authentication from a token file (one admin in system:masters and the users the test
// names, who start with no rights at all), RBAC authorization, anonymous requests refused,
// a service-account key pair generated for the run, TLS on the API server (its
// self-signed certificate from --cert-dir) and mutual TLS between it and etcd. No
// controller manager, scheduler or kubelet runs: objects are stored and validated, but
// nothing acts on them (a StatefulSet makes no pods; a test creates the pods itself).
//
// The binaries are found in $KUBE_BIN (kube-apiserver and etcd). Without it a test that
// asks for a server is skipped with "skipped: needs kube-apiserver (KUBE_BIN)"; with
// LOAM_REQUIRE_REAL=1 (CI) it fails instead. .ci/run builds both:
//
//	cd conformance/kubetest/bin
//	go build -o "$KUBE_BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
//	go build -o "$KUBE_BIN/etcd" go.etcd.io/etcd/server/v3
//
// This package needs no Kubernetes client: it hands a test the server's URL, its CA
// certificate and the users' tokens, and the test brings its own client (client-go lives
// in the nested modules that use it, such as adapters/kubernetes).
package kubetest
