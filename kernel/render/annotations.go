package render

import (
	"errors"
	"fmt"
	"strconv"

	"loam.dev/router/kernel/shardmap"
)

// AnnotationGeneration is the ConfigMap annotation that carries the generation of the files
// in it. A restarting router instance reads the ConfigMap, so the annotation is what says
// which generation it will come back on; SHOW POOLS (GenerationFromPools) says which one
// a running PgDog has loaded.
const AnnotationGeneration = "loam.dev/router-generation"

// ErrNoGeneration is returned by GenerationFromAnnotations when the annotation is absent:
// the ConfigMap was not written by Loam (or not yet).
var ErrNoGeneration = errors.New("render: no " + AnnotationGeneration + " annotation")

// Annotations returns the metadata annotations of the ConfigMap that holds rec's rendered
// files: AnnotationGeneration = rec.Generation in decimal. The map is new on each call.
func Annotations(rec *shardmap.Record) map[string]string {
	return map[string]string{AnnotationGeneration: strconv.FormatUint(rec.Generation, 10)}
}

// GenerationFromAnnotations reads AnnotationGeneration back. It accepts only what
// Annotations writes, canonical decimal of at least 1, so that two spellings of one
// generation cannot both be stored.
func GenerationFromAnnotations(annotations map[string]string) (uint64, error) {
	v, ok := annotations[AnnotationGeneration]
	if !ok {
		return 0, ErrNoGeneration
	}
	g, err := strconv.ParseUint(v, 10, 64)
	if err != nil || g == 0 || v[0] == '0' {
		return 0, fmt.Errorf("render: annotation %s is %q; want the generation in decimal (1, 2, ...), as Annotations writes it", AnnotationGeneration, v)
	}
	return g, nil
}
