// Package allocdir builds and removes an alloc's directory tree:
//
//	<data_dir>/alloc/<alloc id>/
//	├── alloc/            shared by the alloc's tasks (NOMAD_ALLOC_DIR)
//	│   ├── data/         world-writable with the sticky bit (tasks may run as
//	│   ├── tmp/          different users); likewise tmp/
//	│   └── logs/         <task>.stdout.0, <task>.stderr.0 and rotated files
//	└── <task>/           the task's working dir (or chroot for exec), 0700: the
//	                      exec driver gives it to the task's user
//	    ├── local/        NOMAD_TASK_DIR
//	    ├── secrets/      NOMAD_SECRETS_DIR, mode 0700
//	    └── tmp/
//
// Destroy never deletes through a mount point: anything still mounted
// under the alloc dir (a chroot's bind mounts, a CSI volume) is unmounted
// first, and if that fails the directory is left in place.
package allocdir

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// AllocDir is one alloc's directory tree.
type AllocDir struct {
	// Dir is <data_dir>/alloc/<alloc id>.
	Dir string
	// SharedDir is Dir/alloc.
	SharedDir string
	// LogDir is SharedDir/logs.
	LogDir string
}

// TaskDir is one task's part of the tree.
type TaskDir struct {
	Name       string
	Dir        string
	LocalDir   string
	SecretsDir string
	TmpDir     string
	// LogDir is shared with the other tasks (files are named per task).
	LogDir string
}

// New describes the alloc dir for allocID under root (<data_dir>/alloc);
// it creates nothing.
func New(root, allocID string) *AllocDir {
	dir := filepath.Join(root, allocID)
	shared := filepath.Join(dir, "alloc")
	return &AllocDir{Dir: dir, SharedDir: shared, LogDir: filepath.Join(shared, "logs")}
}

// TaskDir describes the dir of task name. The servers refuse task names
// that are not one safe path element; should one arrive anyway (an older
// server), it is escaped so the dir stays inside the alloc dir, and Build
// refuses it.
func (d *AllocDir) TaskDir(name string) *TaskDir {
	dir := filepath.Join(d.Dir, pathElement(name))
	return &TaskDir{
		Name:       name,
		Dir:        dir,
		LocalDir:   filepath.Join(dir, "local"),
		SecretsDir: filepath.Join(dir, "secrets"),
		TmpDir:     filepath.Join(dir, "tmp"),
		LogDir:     d.LogDir,
	}
}

// Build creates the tree for the given tasks. It is idempotent, so a
// restored alloc can call it again.
func (d *AllocDir) Build(tasks []string) error {
	dirs := []struct {
		path string
		mode os.FileMode
	}{
		{d.Dir, 0o755},
		{d.SharedDir, 0o755},
		// Shared by the alloc's tasks, which may run as different users.
		{filepath.Join(d.SharedDir, "data"), 0o777 | os.ModeSticky},
		// Shared tmp dirs are world-writable with the sticky bit. Go's
		// FileMode spells the sticky bit os.ModeSticky; 0o1000 is not it.
		{filepath.Join(d.SharedDir, "tmp"), 0o777 | os.ModeSticky},
		{d.LogDir, 0o755},
	}
	for _, name := range tasks {
		if !safeElement(name) {
			return fmt.Errorf("building alloc dir: task name %q is not a single path element; rename the task", name)
		}
		td := d.TaskDir(name)
		dirs = append(dirs, []struct {
			path string
			mode os.FileMode
		}{{td.Dir, 0o700}, {td.LocalDir, 0o755}, {td.SecretsDir, 0o700}, {td.TmpDir, 0o777 | os.ModeSticky}}...)
	}
	// Each directory's parent comes before it, so one mkdir makes it; a
	// chmod follows only where the umask may have cleared bits of its mode
	// or it was there already. It runs beside the CSI hook's mounts, and
	// on ext4 every syscall of it slows them (9 stats, 9 mkdirs and 9
	// chmods were 240 µs alone, BenchmarkBuild).
	mask := umask()
	for _, dd := range dirs {
		err := os.Mkdir(dd.path, dd.mode)
		switch {
		case err == nil:
			if dd.mode.Perm()&mask == 0 {
				continue
			}
		case errors.Is(err, fs.ErrExist):
		case errors.Is(err, fs.ErrNotExist):
			// The alloc dir's parent (<data_dir>/alloc) is missing.
			if err := os.MkdirAll(dd.path, dd.mode); err != nil {
				return fmt.Errorf("building alloc dir: %w", err)
			}
		default:
			return fmt.Errorf("building alloc dir: %w", err)
		}
		// Set the mode we mean, whatever the umask or an earlier build did.
		if err := os.Chmod(dd.path, dd.mode); err != nil {
			return fmt.Errorf("building alloc dir: %w", err)
		}
	}
	return nil
}

// umask is the process's file mode creation mask, read once from
// /proc/self/status (setting it to read it back would race with files
// other goroutines create); 0o777 (chmod every directory) where it cannot
// be read.
var umask = sync.OnceValue(func() os.FileMode {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o777
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				return 0o777
			}
			return os.FileMode(m) & 0o777
		}
	}
	return 0o777
})

// Destroy unmounts whatever is mounted under the tree, then removes it.
// It is idempotent.
func (d *AllocDir) Destroy() error {
	if err := unmountUnder(d.Dir); err != nil {
		return fmt.Errorf("removing alloc dir %s: %w", d.Dir, err)
	}
	if err := os.RemoveAll(d.Dir); err != nil {
		return fmt.Errorf("removing alloc dir %s: %w", d.Dir, err)
	}
	return nil
}

// safeElement reports whether name joins under a directory as exactly one
// element of it.
func safeElement(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\\\x00")
}

// pathElement is name when it is safe, else name escaped so it is.
func pathElement(name string) string {
	if safeElement(name) {
		return name
	}
	return "%" + url.PathEscape(strings.ReplaceAll(name, ".", "%2E"))
}
