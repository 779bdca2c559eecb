package driver_test

import (
	"context"
	"fmt"
	"time"

	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// A toy machine, to show what plugging any machine into the driver takes. It greets each
// name once, then waits 10 ms and reports how many it greeted. Its inputs, commands and
// snapshot are its own types, as every machine's are.
type (
	helloInput     interface{ isHello() }
	helloStart     struct{ Names []string }
	helloGreeted   struct{ Step string }
	helloTimer     machine.TimerFired
	helloRestarted struct{}

	helloCommand interface{}
	helloGreet   struct{ Step, Name string } // executor: greet, answer helloGreeted
	helloWait    struct{ machine.SetTimer }  // the driver's: a real timer
	helloDone    struct{ Greeted int }       // executor: report, no answer

	hello struct { // the machine is its own snapshot here: exported, JSON-able fields
		Waiting []string
		Greeted int
	}
)

func (helloStart) isHello()     {}
func (helloGreeted) isHello()   {}
func (helloTimer) isHello()     {}
func (helloRestarted) isHello() {}

func (h *hello) Snapshot() hello { return *h }

func (h *hello) On(ctx *machine.Ctx, in helloInput) []helloCommand {
	var out []helloCommand
	switch in := in.(type) {
	case helloStart:
		for _, n := range in.Names {
			h.Waiting = append(h.Waiting, n)
			out = append(out, helloGreet{Step: "greet/" + n, Name: n})
		}
	case helloGreeted:
		h.Greeted++
		if h.Greeted == len(h.Waiting) {
			out = append(out, helloWait{machine.SetTimer{ID: "done", At: ctx.Now + 10}})
		}
	case helloTimer:
		out = append(out, helloDone{h.Greeted})
	case helloRestarted: // a real machine re-issues what was in flight here
	}
	return out
}

// Plugging a machine in: an Executor that makes one adapter call per command and returns
// the input that answers it, and a Kind naming the machine's constructors and its timer
// and restart inputs. Here every command is Ordered (run one at a time, in issue order) so
// the printed lines come out in a fixed order; real kinds order only what must be.
func Example() {
	exec := driver.ExecutorFunc[helloInput, helloCommand](func(ctx context.Context, c helloCommand) (helloInput, bool) {
		switch c := c.(type) {
		case helloGreet:
			fmt.Println("hello,", c.Name) // an adapter call: a query, an RPC...
			return helloGreeted{Step: c.Step}, true
		case helloDone:
			fmt.Println("greeted", c.Greeted)
		}
		return nil, false
	})
	type M = driver.Machine[helloInput, helloCommand, hello]
	kind := driver.Kind[helloInput, helloCommand, hello]{
		Name:      "hello",
		New:       func() M { return &hello{} },
		Restore:   func(s hello) (M, error) { return &s, nil },
		Restarted: helloRestarted{},
		Timer:     func(t machine.TimerFired) helloInput { return helloTimer(t) },
		Exec:      exec,
		Ordered:   func(helloCommand) bool { return true },
	}
	err := driver.Run[helloInput](context.Background(), kind, driver.Config[helloInput]{ID: "demo", Logger: quiet},
		helloStart{Names: []string{"pgdog-1", "pgdog-2"}})
	fmt.Println("idle:", err)
	// Output:
	// hello, pgdog-1
	// hello, pgdog-2
	// greeted 2
	// idle: <nil>
}

// ConfigPush runs the configpush machine against in-memory fakes of the seams: the run
// ends by itself when every instance is accounted for.
func ExampleConfigPush() {
	insts, _, ids := fakeInstances(3, time.Millisecond)
	exec := &driver.ConfigPushExecutor{
		Target:    &fakeTarget{},
		Instance:  driver.Lookup(insts),
		OnOutcome: func(o configpush.Outcome) { fmt.Println(o) },
		Logger:    quiet,
	}
	err := driver.Run(context.Background(), driver.ConfigPush(exec, configpush.Options{}),
		driver.Config[configpush.Input]{ID: "prod/app", Logger: quiet}, push(4, ids))
	fmt.Println("idle:", err)
	// Output:
	// Outcome gen=4 confirmed=(pgdog-0,pgdog-1,pgdog-2)
	// idle: <nil>
}

// A run on a FakeClock: the machine sets an alarm an hour ahead of ctx.Now, and the test
// moves the clock instead of waiting. WaitPending returns once the run has set the timer;
// Advance calls what it makes due before it returns.
func ExampleFakeClock() {
	clock := driver.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	kind := alarmKind(&alarm{}, func(at time.Time) { fmt.Println("rang at", at.UTC().Format(time.TimeOnly)) })
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		done <- driver.Run(ctx, kind, driver.Config[alarmInput]{ID: "demo", Logger: quiet, Clock: clock}, alarmInput(alarmStart{After: time.Hour}))
	}()
	if err := clock.WaitPending(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	clock.Advance(59 * time.Minute)
	fmt.Println("timers pending after 59 minutes:", clock.Pending())
	clock.Advance(time.Minute)
	fmt.Println("idle:", <-done)
	// Output:
	// timers pending after 59 minutes: 1
	// rang at 13:00:00
	// idle: <nil>
}
