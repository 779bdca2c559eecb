// Package configmap puts rendered router files where router instances read them
// (adapters.ConfigTarget). Dir is the development target: a directory laid out the way the
// kubelet lays out a mounted ConfigMap, so that an instance reads the same paths in
// development as in Kubernetes and a generation replaces the previous one in one rename.
//
//	<dir>/..g00000000000000000007.<rand>/   one generation's files and its ..generation marker
//	<dir>/..data -> ..g00000000000000000007.<rand>
//	<dir>/pgdog.toml -> ..data/pgdog.toml
//	<dir>/users.toml -> ..data/users.toml
//
// Instances are pointed at <dir>/pgdog.toml and <dir>/users.toml. A write fills a new
// generation directory, makes it durable, then swaps ..data to it with one rename(2): a
// reader that resolves ..data once sees every file of one generation, and a reader that
// opens the files one by one never sees a file half written (PgDog opens them one by one;
// its generation marker, kernel/render's GenerationDatabase, tells a mixed load apart).
// The generation is recorded in ..data/..generation, next to the files it describes, so
// the two change together; a write of an older generation is refused with
// *adapters.GenerationError and leaves everything as it was.
//
// Names beginning with ".." are the layout's own; rendered files may not use them. The
// previous generation's directory is kept until the next write, so a reader that resolved
// ..data just before a swap can still finish.
//
// A Kubernetes ConfigMap target is not here: it needs k8s.io/client-go, which the main
// module does not take on (it would live in a nested module, as adapters/vtctld does).
package configmap
