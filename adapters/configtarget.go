package adapters

import (
	"context"
	"errors"
	"fmt"

	"loam.dev/router/kernel/render"
)

// ConfigTarget is where rendered router files go: a Kubernetes ConfigMap every instance
// mounts, or a directory in development (adapters/configmap). ConfigPush and Cutover write
// through it before they reload any instance.
type ConfigTarget interface {
	// WriteFiles puts files, rendered for generation, in place all at once (instances
	// never see half of them). It must not replace files of a newer generation: two
	// writes can race after a timeout, and the older must lose. Then it writes nothing
	// and returns an error matching ErrNewerGeneration (a *GenerationError). Writing the
	// generation the target already holds again is not an error.
	WriteFiles(ctx context.Context, generation uint64, files render.Files) error
}

// ErrNewerGeneration: the target already holds files of a newer generation than the one it
// was asked to write, and kept them.
var ErrNewerGeneration = errors.New("adapters: the target already holds a newer generation")

// GenerationError is a ConfigTarget's refusal to go backwards.
type GenerationError struct {
	Target string // the directory or ConfigMap
	Have   uint64 // the generation it holds
	Want   uint64 // the generation it was asked to write
}

func (e *GenerationError) Error() string {
	return fmt.Sprintf("adapters: %s holds generation %d; not replacing it with %d (a newer push has written it; this write is stale)", e.Target, e.Have, e.Want)
}

// Is makes errors.Is(err, ErrNewerGeneration) true.
func (e *GenerationError) Is(target error) bool { return target == ErrNewerGeneration }
