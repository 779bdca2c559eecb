package model

import (
	"errors"
	"fmt"
	"hash/fnv"

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
	// ProjectionDelay, in milliseconds, models the kubelet: a pod sees a write only some
	// time after it took effect, a lag drawn per pod and per write in [0, ProjectionDelay]
	// (from a hash of the two, so it consumes nothing of the simulator's randomness), and
	// a router that starts or reloads before then reads the files it saw before. Zero (the
	// default) is a directory every instance reads at once.
	ProjectionDelay int64
	gen             uint64
	files           render.Files
	history         []projected // with ProjectionDelay: every write, oldest first
	// Writes is every write that took effect, for the checkers.
	Writes []FilesWrite
}

type projected struct {
	at    int64
	gen   uint64
	files render.Files
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
	if f.history == nil {
		f.history = []projected{{at: -1 << 62, gen: f.gen, files: f.files}}
	}
	f.gen, f.files = gen, files
	var now int64
	var step int
	if f.s != nil {
		now, step = f.s.Now(), f.s.Steps()
	}
	f.history = append(f.history, projected{at: now, gen: gen, files: files})
	f.Writes = append(f.Writes, FilesWrite{T: now, Step: step, Generation: gen})
	return nil
}

// Read returns the files and their generation.
func (f *Files) Read() (uint64, render.Files) { return f.gen, f.files }

// ReadAs returns the files pod sees now: with ProjectionDelay, the newest write whose lag
// for pod has passed; without, Read's.
func (f *Files) ReadAs(pod string) (uint64, render.Files) {
	if f.ProjectionDelay <= 0 || f.s == nil || f.history == nil {
		return f.Read()
	}
	now := f.s.Now()
	for i := len(f.history) - 1; i > 0; i-- {
		w := f.history[i]
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d", pod, i)
		if now >= w.at+int64(h.Sum64()%uint64(f.ProjectionDelay+1)) {
			return w.gen, w.files
		}
	}
	return f.history[0].gen, f.history[0].files
}
