// Package impure breaks every clause of the sans-I/O rule once. TestPurityCatchesBadFixture
// must report each of them; it lives under testdata so it is never built.
package impure

import (
	"database/sql"
	"log"
	"log/slog"
	mrand "math/rand"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

var _ = sql.ErrNoRows
var _ = http.StatusOK
var _ = exec.ErrNotFound
var _ = syscall.EINVAL
var _ sync.Mutex
var _ net.Addr
var _ slog.Value // allowed: a value type, no logger

func Bad() {
	_ = time.Now()
	time.Sleep(time.Millisecond)
	<-time.After(time.Millisecond)
	_ = time.Tick(time.Second)
	_ = mrand.Intn(3)
	_ = rand.IntN(3)
	_ = os.Getenv("HOME")
	slog.Info("a log line")
	log.Print("another")
	go Bad()
}
