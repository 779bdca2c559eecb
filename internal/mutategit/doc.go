// Package mutategit holds git, the POSIX shell script that make mutate MUTATE_DIFF=<rev> puts
// first on go-gremlins' PATH: it rewrites gremlins v0.6.0's one git call, `git diff
// --merge-base <rev>`, into `git diff -U0 --relative=$MUTATE_REL --merge-base <rev>`, which
// works around two bugs of gremlins' diff mode (package-relative file names, merged hunks;
// see the script and machine/MUTATION.md), and runs every other git call unchanged. The
// package has no Go code; its test checks the script.
package mutategit
