package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/indoubt"
)

// generationFile sits beside the rendered files and names their generation, as the
// ConfigMap annotation loam.dev/router-generation does in Kubernetes.
const generationFile = ".loam-generation"

// dirTarget writes a database's rendered files into one directory that every router
// instance reads (a development stand-in for a ConfigMap). Each file is replaced
// atomically, then the generation file; files of a newer generation are never replaced.
type dirTarget struct {
	dir string
	mu  sync.Mutex
}

var _ driver.ConfigTarget = (*dirTarget)(nil)

// generation reads the generation of the files in place (0 when there are none).
func (t *dirTarget) generation() (uint64, error) {
	data, err := os.ReadFile(filepath.Join(t.dir, generationFile))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	g, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a generation: %w", filepath.Join(t.dir, generationFile), data, err)
	}
	return g, nil
}

// WriteFiles implements driver.ConfigTarget.
func (t *dirTarget) WriteFiles(ctx context.Context, gen uint64, files render.Files) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return fmt.Errorf("files_dir %s: %w", t.dir, err)
	}
	have, err := t.generation()
	if err != nil {
		return err
	}
	if have > gen {
		return fmt.Errorf("%s holds generation %d, newer than %d: %w", t.dir, have, gen, configpush.ErrNewerGeneration)
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := writeAtomic(t.dir, f.Name, f.Data); err != nil {
			return err
		}
	}
	return writeAtomic(t.dir, generationFile, []byte(strconv.FormatUint(gen, 10)+"\n"))
}

// writeAtomic replaces dir/name by a temporary file renamed over it, synced.
func writeAtomic(dir, name string, data []byte) error {
	if name == "" || filepath.Base(name) != name {
		return fmt.Errorf("file name %q must be a plain file name", name)
	}
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// fileAlerts appends every alert delivery to a JSON-lines file: a raise is an upsert by id
// and a repeated step is the same request, so a reader keeps the last line per id.
type fileAlerts struct {
	path string
	mu   sync.Mutex
}

type alertLine struct {
	At     int64          `json:"at"`
	Op     string         `json:"op"` // raise or clear
	Step   string         `json:"step"`
	ID     string         `json:"id"`
	Source string         `json:"source"`
	Alert  *indoubt.Alert `json:"alert,omitempty"`
	Reason string         `json:"reason,omitempty"`
}

func (f *fileAlerts) append(l alertLine) error {
	l.At = time.Now().UnixMilli()
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("alerts.path %s: %w", f.path, err)
	}
	defer file.Close()
	if _, err := file.Write(append(data, '\n')); err != nil {
		return err
	}
	return file.Sync()
}

// Raise implements driver.AlertSink.
func (f *fileAlerts) Raise(ctx context.Context, a indoubt.Alert) error {
	return f.append(alertLine{Op: "raise", Step: a.Step, ID: a.ID, Source: "indoubt", Alert: &a})
}

// Clear implements driver.AlertSink.
func (f *fileAlerts) Clear(ctx context.Context, id string) error {
	return f.append(alertLine{Op: "clear", ID: id, Source: "indoubt"})
}

// readAlertLines reads an alerts file (for tests and `indoubt list`).
func readAlertLines(path string) ([]alertLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []alertLine
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l alertLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// staticRoster lists a database's router processes from loam.toml: each router's NODE_ID,
// start time unknown (so a restart with the same NODE_ID is not seen; an orchestrator's
// roster would see it).
type staticRoster []indoubt.Process

func (r staticRoster) Processes(context.Context) ([]indoubt.Process, error) { return r, nil }
