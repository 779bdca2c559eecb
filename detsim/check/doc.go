// Package check holds the simulator's checkers: functions over a run's client history and
// the models' histories that return the first invariant violation, by a stable name. Every
// one treats an indeterminate outcome (a timeout, a reset, a session ended under a
// transaction) as "may have applied": it is never a failure of the system under test, and
// both its presence and its absence in the data are accepted. Each invariant has a named
// mutant that trips it, in the scenario tests.
package check
