package configpush

import (
	"fmt"
	"log/slog"
	"strings"
)

// The String methods render commands as one line each, `Kind key=value ...`, for logs and
// for the interaction scripts under testdata/. Files are named, never dumped.

func (c WriteFiles) String() string {
	return fmt.Sprintf("WriteFiles step=%s attempt=%d gen=%d files=(%s)", c.Step, c.Attempt, c.Generation, strings.Join(c.Files.Names(), ","))
}

func (c Reload) String() string {
	return fmt.Sprintf("Reload step=%s attempt=%d instance=%s gen=%d", c.Step, c.Attempt, c.Instance, c.Generation)
}

func (c AwaitFiles) String() string {
	return fmt.Sprintf("AwaitFiles step=%s attempt=%d instance=%s gen=%d", c.Step, c.Attempt, c.Instance, c.Generation)
}

func (c Observe) String() string {
	return fmt.Sprintf("Observe step=%s attempt=%d instance=%s gen=%d", c.Step, c.Attempt, c.Instance, c.Generation)
}

func (c SetTimer) String() string { return fmt.Sprintf("SetTimer id=%s at=%d", c.ID, c.At) }

func (c CancelTimer) String() string { return "CancelTimer id=" + c.ID }

func (c Outcome) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Outcome gen=%d", c.Generation)
	if c.Refused != "" {
		fmt.Fprintf(&b, " refused=%q", c.Refused)
	}
	if c.FilesErr != "" {
		fmt.Fprintf(&b, " files_err=%q", c.FilesErr)
	}
	if c.SupersededBy != 0 {
		fmt.Fprintf(&b, " superseded_by=%d", c.SupersededBy)
	}
	for _, l := range []struct {
		k  string
		vs []string
	}{{"confirmed", c.Confirmed}, {"ahead", c.Ahead}, {"unknown", c.Unknown}, {"stuck", c.Stuck}} {
		if len(l.vs) > 0 {
			fmt.Fprintf(&b, " %s=(%s)", l.k, strings.Join(l.vs, ","))
		}
	}
	return b.String()
}

// LogValue keeps the files (users.toml carries every password) out of every log handler,
// text or JSON, at any level: the command logs as its one-line String, which names them.
func (c WriteFiles) LogValue() slog.Value { return slog.StringValue(c.String()) }

// LogValue: see WriteFiles.LogValue.
func (c Reload) LogValue() slog.Value { return slog.StringValue(c.String()) }

// LogValue logs a Push by its record, generation, instances and the files' names and
// digest, never their contents.
func (p Push) LogValue() slog.Value {
	var ver uint64
	if p.Record != nil {
		ver = p.Record.Version
	}
	return slog.StringValue(fmt.Sprintf("Push gen=%d version=%d instances=(%s) %s", p.Generation, ver, strings.Join(p.Instances, ","), p.Files))
}
