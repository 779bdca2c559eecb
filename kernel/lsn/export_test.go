package lsn

// Mutants of the pruning, reachable only from tests: each one breaks one clause of the
// package doc, and a test shows that the matching property check fails with it.
const (
	MutantKeepFirstOfRun  = mutantKeepFirstOfRun
	MutantNoProgressPrune = mutantNoProgressPrune
	MutantNoAnchor        = mutantNoAnchor
	MutantNoAgePrune      = mutantNoAgePrune
)

// Mutant is the test-visible name of the mutant type.
type Mutant = mutant

// WithMutant makes new histories of hs (and h, if not nil) run the given mutant.
func (hs *Histories) WithMutant(m Mutant) *Histories { hs.mutant = m; return hs }

// NewMutantHistory returns a history running the given mutant.
func NewMutantHistory(window int64, m Mutant) *History {
	h := NewHistory(window)
	h.mutant = m
	return h
}

// SizeofParts exposes the byte constants Footprint uses, so a test can check them against
// unsafe.Sizeof.
var SizeofParts = struct{ Point, History int }{pointBytes, historyBytes}

// PointForSize is a zero retained sample and HistoryForSize a zero history, for unsafe.Sizeof.
var (
	PointForSize   point
	HistoryForSize History
)
