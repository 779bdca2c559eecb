package driver

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"loam.dev/router/machine"
)

// TraceEnv names the environment variable that turns spec traces on: when it holds a
// path, Run appends every SpecEvent to that file as a canonical JSON line.
const TraceEnv = "LOAM_SPEC_TRACE"

// TraceFile is a TraceSink appending canonical JSON lines (machine.Encoder) to a file. It
// is safe for concurrent use: several drivers may share one. Each event is one write of one
// whole line, so files opened by several processes in append mode interleave whole lines.
type TraceFile struct {
	mu     sync.Mutex
	f      *os.File
	enc    *machine.Encoder
	logger *slog.Logger
	failed bool
}

// OpenTrace opens path for appending (creating it if needed, 0600: the trace names every
// step the controller takes). An existing file readable by others is made the owner's.
func OpenTrace(path string, logger *slog.Logger) (*TraceFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("driver: opening the spec trace %s=%q: %w", TraceEnv, path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("driver: making the spec trace %s=%q the owner's alone: %w", TraceEnv, path, err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &TraceFile{f: f, enc: machine.NewEncoder(f), logger: logger}, nil
}

// TraceFromEnv opens the file named by LOAM_SPEC_TRACE, or returns nil when it is unset.
func TraceFromEnv(logger *slog.Logger) (*TraceFile, error) {
	path := os.Getenv(TraceEnv)
	if path == "" {
		return nil, nil
	}
	return OpenTrace(path, logger)
}

// Emit writes one event. A failure is logged once; a machine cannot be stopped by its trace.
func (t *TraceFile) Emit(e machine.SpecEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.enc.Encode(e); err != nil && !t.failed {
		t.failed = true
		t.logger.Error("spec trace write failed; later failures are not logged", "path", t.f.Name(), "event", e.String(), "err", err)
	}
}

// Close closes the file.
func (t *TraceFile) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.f.Close()
}
