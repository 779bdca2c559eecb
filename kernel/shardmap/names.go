package shardmap

import "fmt"

// The names below are what JSON, the CLI and error messages use. One table per enum keeps
// String and parsing in step.

var engineNames = []string{Postgres: "postgres", MySQL: "mysql"}
var routerNames = []string{PgDog: "pgdog", Vitess: "vitess"}
var fenceNames = []string{FenceOpen: "open", FenceWrites: "writes"}
var phaseNames = []string{Serving: "serving", Resharding: "resharding", CuttingOver: "cutting_over", Fenced: "fenced"}
var stepNames = []string{StepCopy: "copy", StepPause: "pause", StepFence: "fence", StepCutover: "cutover", StepPublish: "publish", StepResume: "resume", StepFinalize: "finalize"}
var keyTypeNames = []string{Bigint: "bigint", Integer: "integer", Text: "text", UUID: "uuid"}
var vindexNames = []string{VindexHash: "hash", VindexXXHash: "xxhash"}

func name[T ~uint8](names []string, v T, what string) string {
	if int(v) < len(names) && v != 0 {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", what, uint8(v))
}

func parseName[T ~uint8](names []string, s, what string) (T, error) {
	for i, n := range names {
		if i != 0 && n == s {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (one of %v)", what, s, names[1:])
}

func valid[T ~uint8](names []string, v T) bool { return v != 0 && int(v) < len(names) }

func (e Engine) String() string      { return name(engineNames, e, "Engine") }
func (k RouterKind) String() string  { return name(routerNames, k, "RouterKind") }
func (f Fence) String() string       { return name(fenceNames, f, "Fence") }
func (p Phase) String() string       { return name(phaseNames, p, "Phase") }
func (s CutoverStep) String() string { return name(stepNames, s, "CutoverStep") }
func (t KeyType) String() string     { return name(keyTypeNames, t, "KeyType") }
func (k VindexKind) String() string  { return name(vindexNames, k, "VindexKind") }

// ParseCutoverStep reads a step name such as "fence".
func ParseCutoverStep(s string) (CutoverStep, error) {
	return parseName[CutoverStep](stepNames, s, "cutover step")
}

// SchemeKind names the scheme types in JSON and messages.
func SchemeKind(s Scheme) string {
	switch s.(type) {
	case PgHash:
		return "pg_hash"
	case PgRange:
		return "pg_range"
	case PgList:
		return "pg_list"
	case Vindex:
		return "vindex"
	case nil:
		return "none"
	}
	return fmt.Sprintf("%T", s)
}
