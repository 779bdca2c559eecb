package model

import (
	"errors"
	"fmt"

	"loam.dev/router/detsim"
	"loam.dev/router/kernel/render"
)

// ErrNewerGeneration is what Files.Write answers when it holds files of a newer generation:
// an older write that arrives late must lose (the ConfigMap annotation check).
var ErrNewerGeneration = errors.New("model: the files target holds a newer generation")

// ErrWriteRefused is the files.write.fail fault: the API server refused the write.
var ErrWriteRefused = errors.New("model: files write refused (injected API server error)")

// Files is where rendered files go (a Kubernetes ConfigMap with the generation annotation):
// router instances read them when they start and on RELOAD.
type Files struct {
	s    *detsim.Sim
	Node detsim.NodeID
	// NoGenerationCheck is the mutant "the files target does not compare the generation
	// annotation": a write that arrives late replaces newer files.
	NoGenerationCheck bool
	gen               uint64
	files             render.Files
	// Writes is every write that took effect, for the checkers.
	Writes []FilesWrite
}

// FilesWrite is one write that took effect; Step orders it within a millisecond.
type FilesWrite struct {
	T          int64
	Step       int
	Generation uint64
}

// NewFiles adds the files node holding files for gen.
func NewFiles(s *detsim.Sim, gen uint64, files render.Files) *Files {
	f := &Files{s: s, gen: gen, files: files}
	if s != nil {
		f.Node = s.Net.AddNode("configmap")
	}
	return f
}

// Write replaces the files, all at once, unless a newer generation is there. Fault
// files.write.fail refuses the write.
func (f *Files) Write(gen uint64, files render.Files) error {
	if f.s != nil && f.s.Fault("files.write.fail") {
		return fmt.Errorf("configmap: write of generation %d: %w", gen, ErrWriteRefused)
	}
	if gen < f.gen && !f.NoGenerationCheck {
		return fmt.Errorf("configmap: write of generation %d refused, generation %d is there: %w", gen, f.gen, ErrNewerGeneration)
	}
	f.gen, f.files = gen, files
	var now int64
	var step int
	if f.s != nil {
		now, step = f.s.Now(), f.s.Steps()
	}
	f.Writes = append(f.Writes, FilesWrite{T: now, Step: step, Generation: gen})
	return nil
}

// Read returns the files and their generation.
func (f *Files) Read() (uint64, render.Files) { return f.gen, f.files }
