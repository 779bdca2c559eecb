package configpush_test

import (
	"fmt"
	"math/rand/v2"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// A push of the generation the store publishes to two instances, every reply a success: the
// files are written once, then each instance is reloaded and observed.
func Example() {
	rec := &shardmap.Record{Version: 7, Generation: 4, Router: shardmap.Router{Kind: shardmap.PgDog, Name: "app"}}
	files, _ := render.NewFiles(render.File{Name: "pgdog.toml", Data: []byte("# rendered\n")})
	m := configpush.New(configpush.Options{})
	ctx := &machine.Ctx{Now: 0, Rand: rand.New(rand.NewChaCha8([32]byte{})), Trace: machine.Discard}

	queue := []configpush.Input{configpush.Push{Record: rec, Generation: rec.Generation, Files: files, Instances: []string{"pgdog-1", "pgdog-2"}}}
	for len(queue) > 0 {
		in := queue[0]
		queue = queue[1:]
		for _, c := range m.On(ctx, in) {
			// A driver executes each command through an adapter; here every one succeeds.
			switch c := c.(type) {
			case configpush.WriteFiles:
				queue = append(queue, configpush.FilesWritten{Step: c.Step, Attempt: c.Attempt})
			case configpush.Reload:
				queue = append(queue, configpush.Reloaded{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance})
			case configpush.Observe:
				queue = append(queue, configpush.Observed{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Generation: 4, Known: true})
			case configpush.Outcome:
				fmt.Println(c)
			}
		}
	}
	// Output:
	// Outcome gen=4 confirmed=(pgdog-1,pgdog-2)
}

// A push of files rendered for the reshard target before the store published it is
// refused: an instance restarting now would route by a generation whose cutover has not
// fenced the source.
func ExampleMachine_On_refused() {
	rec := &shardmap.Record{Version: 7, Generation: 4, Router: shardmap.Router{Kind: shardmap.PgDog, Name: "app"},
		State: shardmap.State{Phase: shardmap.Resharding, To: 5}}
	files := render.Files{{Name: "pgdog.toml", Data: []byte("# target\n")}}
	m := configpush.New(configpush.Options{})
	for _, c := range m.On(&machine.Ctx{}, configpush.Push{Record: rec, Generation: rec.State.To, Files: files, Instances: []string{"pgdog-1"}}) {
		fmt.Println(c.(configpush.Outcome).Refused)
	}
	// Output:
	// generation 5 is not the record's published generation 4: files may be written only for the generation the store publishes (§6.4), since any instance may restart and read them
}
