package machine

// SetTimer asks the driver to deliver TimerFired{ID} as an input once its clock reaches At
// (milliseconds, the same clock as Ctx.Now). Setting a timer with an ID that is already
// pending replaces it: the earlier deadline never fires. Machines wrap it in their own
// command type (embedding keeps the Timer method, which drivers use to recognise it).
type SetTimer struct {
	ID string
	At int64
}

// Timer returns the timer request itself; it lets a driver recognise any machine's timer
// command with one type assertion: cmd.(interface{ Timer() machine.SetTimer }).
func (t SetTimer) Timer() SetTimer { return t }

// CancelTimer asks the driver to drop a pending timer. Cancelling an unknown or already
// fired timer is not an error: a machine must tolerate a TimerFired that raced the cancel,
// so it checks the ID against its own state when the input arrives.
type CancelTimer struct {
	ID string
}

// CancelledTimer returns the cancel request itself, for drivers (see SetTimer.Timer).
func (t CancelTimer) CancelledTimer() CancelTimer { return t }

// TimerFired is the input a driver feeds back when a SetTimer deadline has passed.
type TimerFired struct {
	ID string
}
