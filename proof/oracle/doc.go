// Package oracle runs the proved oracle: the OCaml program extracted from the Coq model of
// kernel/merge (proof/*.v), built by `make proof` into proof/_build/loam-router-oracle. It
// speaks kernel/merge's JSON-lines protocol, so a test can give the same request line to
// kernel/merge and to the oracle and compare the answers with Agree.
//
// The Coq theorems (see proof/README.md) are about the model; this package and the
// differential tests that use it are what tie the model to kernel/merge's Go code and, in
// conformance/mergediff, to Postgres.
package oracle
