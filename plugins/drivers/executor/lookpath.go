package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultPath is the PATH a task gets when its environment has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// pathOf returns the PATH in env, or DefaultPath.
func pathOf(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			return v
		}
	}
	return DefaultPath
}

// lookPath resolves command to the path the task's execve must use: as
// given if it holds a slash (relative to dir if relative), else the first
// executable found in pathList. With root set, every path is inside root,
// and symlinks are resolved as the task will see them.
func lookPath(root, dir, command, pathList string) (string, error) {
	if command == "" {
		return "", errors.New("no command")
	}
	if strings.Contains(command, "/") {
		p := command
		if !path.IsAbs(p) {
			p = path.Join(dir, p)
		}
		if err := checkExecutable(root, p); err != nil {
			return "", fmt.Errorf("command %q: %w", command, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !path.IsAbs(d) {
			continue // a relative PATH entry would depend on the task's cwd
		}
		p := path.Join(d, command)
		if checkExecutable(root, p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q: %w in PATH %q", command, exec.ErrNotFound, pathList)
}

// checkExecutable checks that p (inside root, if set) is an executable file.
func checkExecutable(root, p string) error {
	var mode os.FileMode
	if root == "" {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		mode = fi.Mode()
	} else {
		st, err := statInRoot(root, p)
		if err != nil {
			return err
		}
		mode = os.FileMode(st.Mode & 0o777)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			mode |= os.ModeDir
		} else if st.Mode&unix.S_IFMT != unix.S_IFREG {
			mode |= os.ModeIrregular
		}
	}
	if !mode.IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if mode&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

// statInRoot stats p as a process chrooted into root would see it.
func statInRoot(root, p string) (*unix.Stat_t, error) {
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rootfd)
	fd, err := openInRoot(rootfd, p, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return &st, nil
}
