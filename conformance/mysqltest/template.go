package mysqltest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The template is a data directory made by mariadb-install-db once per test process; each
// server starts from a copy (22 MB with a 4 MB redo log). Its directory name carries the
// process id so that a later process can remove the templates of processes that are gone (a
// test binary has no hook that runs at exit).

const templatePrefix = "loam-mysqltest-template-"

var template struct {
	once sync.Once
	dir  string // the data directory inside the template's own directory
	err  error
}

func templateDir(bins Binaries) (string, error) {
	template.once.Do(func() {
		sweepTemplates()
		root, err := os.MkdirTemp("", templatePrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			template.err = fmt.Errorf("making a directory under %s: %w", os.TempDir(), err)
			return
		}
		data := filepath.Join(root, "data")
		// normal: root@localhost, root@127.0.0.1 and root@::1 with no password.
		// A private tmpdir: a starting server deletes every #sql temporary file in its tmpdir,
		// including those of other servers sharing it.
		args := append(asRoot(), "--datadir="+data, "--tmpdir="+root, "--auth-root-authentication-method=normal",
			"--skip-test-db", "--innodb-log-file-size=4M", "--character-set-server=utf8mb4")
		cmd := command(bins.Install, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			os.RemoveAll(root)
			template.err = fmt.Errorf("%s %s: %w\n%s", bins.Install, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
			return
		}
		template.dir = data
	})
	return template.dir, template.err
}

// RemoveTemplate deletes this process's template data directory; later servers make it
// again. Call it from TestMain after m.Run to leave nothing behind at once; otherwise the next
// test process that starts a server removes it.
func RemoveTemplate() {
	if template.dir != "" {
		os.RemoveAll(filepath.Dir(template.dir))
	}
	template.once = sync.Once{}
	template.dir, template.err = "", nil
}

// sweepTemplates removes the templates of test processes that no longer run.
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
