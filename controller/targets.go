package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/machine/indoubt"
)

// FileAlerts appends every alert delivery to a JSON-lines file: a raise is an upsert by id
// and a repeated step is the same request, so a reader keeps the last line per id.
type FileAlerts struct {
	Path string
	mu   sync.Mutex
}

// AlertLine is one line of an alerts file.
type AlertLine struct {
	At     int64          `json:"at"`
	Op     string         `json:"op"` // raise or clear
	Step   string         `json:"step"`
	ID     string         `json:"id"`
	Source string         `json:"source"`
	Alert  *indoubt.Alert `json:"alert,omitempty"`
	Reason string         `json:"reason,omitempty"`
}

func (f *FileAlerts) append(l AlertLine) error {
	l.At = time.Now().UnixMilli()
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := os.OpenFile(f.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("alerts.path %s: %w", f.Path, err)
	}
	defer file.Close()
	if _, err := file.Write(append(data, '\n')); err != nil {
		return err
	}
	return file.Sync()
}

// Raise implements driver.AlertSink.
func (f *FileAlerts) Raise(ctx context.Context, a indoubt.Alert) error {
	return f.append(AlertLine{Op: "raise", Step: a.Step, ID: a.ID, Source: "indoubt", Alert: &a})
}

// Clear implements driver.AlertSink.
func (f *FileAlerts) Clear(ctx context.Context, id string) error {
	return f.append(AlertLine{Op: "clear", ID: id, Source: "indoubt"})
}

// ReadAlertLines reads an alerts file (for tests and `indoubt list`).
func ReadAlertLines(path string) ([]AlertLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := ParseAlertLines(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ParseAlertLines reads the JSON lines of an alerts file; a line that does not decode is
// an error naming its number.
func ParseAlertLines(data []byte) ([]AlertLine, error) {
	var out []AlertLine
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l AlertLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// staticRoster lists a database's router processes from loam.toml: each router's NODE_ID,
// start time unknown (so a restart with the same NODE_ID is not seen; an orchestrator's
// roster would see it).
type staticRoster []adapters.RouterProcess

func (r staticRoster) Processes(context.Context) ([]adapters.RouterProcess, error) { return r, nil }
