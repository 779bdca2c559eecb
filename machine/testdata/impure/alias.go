package impure

import clock "time"

// Aliased imports are resolved too.
func Alias() clock.Time { return clock.Now() }
