// Package rowsum computes adapters.TableDigest's Sum the one way every backend must, so a
// table's digest can be compared across shards and layouts: the word-wise sum (mod 2^64) of
// the SHA-256 of every row's encoding. A sum does not depend on the order rows are read in
// (shards return them in any order), and a repeated row counts twice (XOR would cancel it).
package rowsum

import (
	"crypto/sha256"
	"encoding/binary"
)

// Mutant is a deliberately wrong way to combine rows, for the backends' mutant tests.
type Mutant uint8

const (
	// Correct is the order-independent sum.
	Correct Mutant = iota
	// XOR combines row hashes by XOR: a duplicated row cancels out.
	XOR
	// Ordered chains rows in scan order: the same rows read in another order differ.
	Ordered
)

// Sum accumulates rows.
type Sum struct {
	mut   Mutant
	acc   [4]uint64
	chain [32]byte
}

// MutantOf is the Mutant a backend's mutant flags select: ordered wins over xor; neither
// is Correct.
func MutantOf(ordered, xor bool) Mutant {
	switch {
	case ordered:
		return Ordered
	case xor:
		return XOR
	}
	return Correct
}

// New returns an empty Sum combining rows as m says (Correct outside mutant tests).
func New(m Mutant) *Sum { return &Sum{mut: m} }

// Add counts one row, given as its encoding.
func (s *Sum) Add(row []byte) {
	if s.mut == Ordered {
		s.chain = sha256.Sum256(append(s.chain[:], row...))
		return
	}
	h := sha256.Sum256(row)
	for i := range s.acc {
		w := binary.BigEndian.Uint64(h[i*8:])
		if s.mut == XOR {
			s.acc[i] ^= w
		} else {
			s.acc[i] += w
		}
	}
}

// Digest is the sum of the rows added so far.
func (s *Sum) Digest() [32]byte {
	if s.mut == Ordered {
		return s.chain
	}
	var d [32]byte
	for i := range s.acc {
		binary.BigEndian.PutUint64(d[i*8:], s.acc[i])
	}
	return d
}
