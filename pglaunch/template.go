package pglaunch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The template is a data directory made by initdb once per process; each server starts
// from a copy. Its directory name carries the process id so that a later process can remove
// the templates of processes that are gone (a test binary has no hook that runs at exit).

const templatePrefix = "loam-pglaunch-template-"

var template struct {
	once sync.Once
	dir  string // the data directory inside the template's own directory
	err  error
}

func templateDir(bin string, o owner) (string, error) {
	template.once.Do(func() {
		sweepTemplates()
		root, err := o.mkdir(templatePrefix + strconv.Itoa(os.Getpid()) + "-")
		if err != nil {
			template.err = err
			return
		}
		data := filepath.Join(root, "data")
		template.err = o.run(bin, "initdb", "-D", data, "--username=postgres", "--auth=trust",
			"--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions", "--wal-segsize=1")
		if template.err != nil {
			os.RemoveAll(root)
			return
		}
		template.dir = data
	})
	return template.dir, template.err
}

// RemoveTemplate deletes this process's template data directory; later servers make it
// again. Call it when the program (or TestMain, after m.Run) is done with servers, to leave
// nothing behind at once; otherwise the next process that starts a server removes it.
func RemoveTemplate() {
	if template.dir != "" {
		os.RemoveAll(filepath.Dir(template.dir))
	}
	template.once = sync.Once{}
	template.dir, template.err = "", nil
}

// sweepTemplates removes the templates of processes that no longer run.
func sweepTemplates() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), templatePrefix+"*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), templatePrefix)
		pid, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '-'), 0)])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			os.RemoveAll(m)
		}
	}
}

// copyDataDir copies the template into a new data directory, keeping modes and ownership.
func copyDataDir(o owner, from, to string) error {
	cp, err := exec.LookPath("cp")
	if err != nil {
		return fmt.Errorf("pglaunch: copying the template data directory needs cp: %w", err)
	}
	if err := o.run(filepath.Dir(cp), "cp", "-a", from, to); err != nil {
		return fmt.Errorf("pglaunch: copying the template data directory: %w", err)
	}
	return nil
}
