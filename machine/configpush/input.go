package configpush

import (
	"errors"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Input is what the driver feeds the machine: a push request, the reply to a command it
// executed, a timer firing, or the news that the machine was restored after a restart.
type Input interface{ isInput() }

// Push asks the machine to move every instance to Generation.
//
// Record is the shard map record exactly as the ShardMapStore returned it (Read or Watch):
// the machine checks against it that Generation is safe to write, which is why the request
// carries the record and not only a number. Files are the routers' files rendered for
// Generation. Instances are the router instance ids to reload; duplicates are ignored.
//
// A Push is refused (Outcome.Refused, nothing written) when Record is missing or has never
// been stored (Version 0), when Generation is not Record.Generation (files rendered for a
// generation the store does not publish yet, such as State.To during a reshard), when
// Generation is below a generation this machine already wrote or is pushing, when Record
// belongs to another database than earlier pushes, when Files is empty, or when an instance
// id is empty.
//
// A Push for the generation already being pushed adds instances it did not have; one for a
// generation that finished retries the instances that were stuck and adds new ones. A Push
// for a newer generation supersedes the one in progress.
type Push struct {
	Record     *shardmap.Record
	Generation uint64
	Files      render.Files
	Instances  []string
}

// FilesWritten answers WriteFiles. Err is nil when every file is durably in place. A target
// that already holds a newer generation must answer with an error wrapping
// ErrNewerGeneration; the machine then ends the push as superseded.
type FilesWritten struct {
	Step    string
	Attempt int
	Err     error
}

// Reloaded answers Reload: Err is nil when the instance accepted the reload.
type Reloaded struct {
	Step     string
	Attempt  int
	Instance string
	Err      error
}

// FilesSeen answers AwaitFiles with the generation of the files the instance sees (0 when
// none of Loam's); Err when that could not be read.
type FilesSeen struct {
	Step       string
	Attempt    int
	Instance   string
	Generation uint64
	Err        error
}

// Observed answers Observe with what the instance reports it routes by. Known is false when
// the instance cannot tell (PgDog exposes no generation; see the package doc), and then
// Generation is ignored.
type Observed struct {
	Step       string
	Attempt    int
	Instance   string
	Generation uint64
	Known      bool
	Err        error
}

// TimerFired is a SetTimer deadline that passed (convert with TimerFired(t) from
// machine.TimerFired).
type TimerFired machine.TimerFired

// Restarted is fed once, first, to a machine rebuilt by Restore: the replies to whatever
// was in flight when the old driver stopped will never come, so the machine issues those
// commands again with the same step ids and attempts (each with a fresh deadline), and sets
// its backoff timers again.
type Restarted struct{}

// ErrNewerGeneration is what a files target wraps when it already holds files of a newer
// generation than the one it was asked to write: it must never replace them (two writes can
// race after a timeout, and the older must lose).
var ErrNewerGeneration = errors.New("configpush: the target already holds a newer generation")

func (Push) isInput()         {}
func (FilesWritten) isInput() {}
func (Reloaded) isInput()     {}
func (Observed) isInput()     {}
func (FilesSeen) isInput()    {}
func (TimerFired) isInput()   {}
func (Restarted) isInput()    {}
