// Package lsn holds what a causal read needs to know about WAL positions, without doing I/O:
// the pg_lsn value itself (parse, format, compare), the normalisation of a primary's insertion
// position at a WAL page boundary, and a bounded history of polled positions per physical
// endpoint.
//
// # Why a history and not just the latest position
//
// Postgres does not tell a client the LSN of the commit it just acknowledged. A causal read
// therefore works from time: the frontend remembers when its last execution on a hostgroup
// completed (t, on the driver's clock), and a background monitor polls every endpoint's
// progress, stamping each sample with the time its poll was sent. A poll sent strictly after
// t was answered after the commit was acknowledged, so its position is at or beyond the
// commit's end: the first successful sample with Sent > t is a sound requirement (History.After),
// and any later sample would be sound too, only stricter. With millisecond clocks "strictly"
// matters: floor(sent) > floor(t) implies sent > t, floor(sent) == floor(t) does not.
//
// # Pruning (what is kept)
//
// A History keeps successful samples in send order and the latest sample, known or not:
//
//   - Progress pruning: a successful sample whose LSN equals the newest retained one replaces
//     it. A run of equal positions is then held by its newest real observation, and every
//     retained sample is preceded by a real sample with a different position (its real
//     predecessor). After(t) returns the same position as it would over the unpruned samples
//     for every t at or after the oldest retained sample: a pruned sample always had the same
//     position as the retained sample that replaced it. A stuck peer costs one sample.
//   - Age pruning: samples sent more than the window (default 60,000 ms) before the newest
//     sample are dropped, except the newest of them, kept as one older anchor. The anchor lets
//     a request whose execution is older than the window still resolve without waiting for
//     new progress; for t before the anchor After(t) answers the anchor, which is sound and
//     at most stricter. Age pruning runs on every recorded sample, successful or not, so
//     down and unknown peers are pruned too.
//   - Failed polls (down, timeout, NULL progress) are not retained as samples: After looks
//     only at successful samples. They do replace the latest sample, so a withdrawn endpoint
//     stops counting as having reached anything (Reached) and shows a NULL position (Rows).
//
// Retained samples per endpoint are therefore at most one per poll within the window plus
// the anchor under steady progress, and at most two for a stuck peer, however long it stays
// stuck.
//
// # Physical endpoints
//
// Histories are keyed by Endpoint (host, port). Hostgroups are routing memberships held
// elsewhere (see loam.dev/router/machine/causal); an endpoint that belongs to several
// hostgroups is sampled, retained and reported once.
package lsn
