package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	ID, ParentID int
	Root         string // the mounted directory within its file system
	MountPoint   string
	FSType       string
	Source       string
}

func (m Mount) String() string {
	return fmt.Sprintf("#%d %s (root %s, %s %s)", m.ID, m.MountPoint, m.Root, m.FSType, m.Source)
}

// MountsUnder returns the mounts whose mount point is dir or below it, in
// mountinfo order (parents before children).
func MountsUnder(dir string) ([]Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountinfo(b, dir)
}

func parseMountinfo(b []byte, dir string) ([]Mount, error) {
	var out []Mount
	for line := range bytes.Lines(b) {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		f := strings.Fields(string(line))
		sep := -1
		for i, x := range f {
			if x == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if len(f) < 7 || sep < 0 || len(f) < sep+3 {
			return nil, fmt.Errorf("mountinfo: bad line %q", line)
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo: bad line %q", line)
		}
		m := Mount{ID: id, ParentID: parent, Root: unescapeMountinfo(f[3]), MountPoint: unescapeMountinfo(f[4]),
			FSType: f[sep+1], Source: unescapeMountinfo(f[sep+2])}
		if dir == "" || m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			out = append(out, m)
		}
	}
	return out, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// UniqueMountID returns the ID of the mount at path as statx(2) gives it
// with STATX_MNT_ID_UNIQUE (Linux 6.8+): unlike the IDs in mountinfo, which
// the kernel hands out again once a mount is gone, it is never reused, so
// an unmount and a mount again at the same place show as a new ID. ok is
// false when the kernel does not give it.
func UniqueMountID(path string) (id uint64, ok bool, err error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID_UNIQUE, &stx); err != nil {
		return 0, false, fmt.Errorf("statx %s: %w", path, err)
	}
	if stx.Mask&unix.STATX_MNT_ID_UNIQUE == 0 {
		return 0, false, nil
	}
	return stx.Mnt_id, true, nil
}

// Proc identifies a process across pid reuse: its pid and its start time
// (field 22 of /proc/<pid>/stat, in clock ticks since boot).
type Proc struct {
	PID       int
	StartTime uint64
}

// procStat is what the harness reads from /proc/<pid>/stat.
type procStat struct {
	State           byte
	PPID, PGID, SID int
	StartTime       uint64
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	var st procStat
	st.State = f[0][0]
	st.PPID, _ = strconv.Atoi(f[1])
	st.PGID, _ = strconv.Atoi(f[2])
	st.SID, _ = strconv.Atoi(f[3])
	st.StartTime, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return st, nil
}

// Alive reports whether the process still runs: /proc/<pid> exists with
// the same start time and it is not a zombie (a zombie has exited; it only
// waits to be collected).
func (p Proc) Alive() bool {
	st, err := readStat(p.PID)
	return err == nil && st.StartTime == p.StartTime && st.State != 'Z' && st.State != 'X'
}

// procInfo is one process as the leftover scan sees it.
type procInfo struct {
	PID     int
	Stat    procStat
	Cmdline string
	Env     []string
}

// allProcesses lists every process but this one and zombies.
func allProcesses() []procInfo {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 1 {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.State == 'Z' || st.State == 'X' {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		out = append(out, procInfo{
			PID: pid, Stat: st,
			Cmdline: strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))),
			Env:     strings.Split(string(env), "\x00"),
		})
	}
	return out
}

// testProcesses returns the processes that belong to the test rooted at
// root (see Harness.killLeftovers).
func testProcesses(root string) []procInfo {
	all := allProcesses()
	marker := markerEnv + "=" + root
	ours := map[int]bool{}
	for _, p := range all {
		if strings.Contains(p.Cmdline, root+"/") || hasEnv(p.Env, marker) || linkUnder(p.PID, "cwd", root) || linkUnder(p.PID, "root", root) {
			ours[p.PID] = true
		}
	}
	self, _ := readStat(os.Getpid())
	var out []procInfo
	for _, p := range all {
		led := (ours[p.Stat.SID] && p.Stat.SID != self.SID) || (ours[p.Stat.PGID] && p.Stat.PGID != self.PGID)
		if ours[p.PID] || led {
			out = append(out, p)
		}
	}
	return out
}

func hasEnv(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}

// linkUnder reports whether /proc/<pid>/<link> (cwd, root) points at or
// below dir: exec tasks are chrooted into their task dir.
func linkUnder(pid int, link, dir string) bool {
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/%s", pid, link))
	return err == nil && (p == dir || strings.HasPrefix(p, dir+"/"))
}

// FindTask returns the top process of an alloc's task: the process whose
// environment names the alloc and the task (NOMAD_ALLOC_ID,
// NOMAD_TASK_NAME) and whose parent's does not (the parent is the
// executor; the task's own children inherit its environment).
func FindTask(allocID, task string) (Proc, error) {
	all := allProcesses()
	isTask := map[int]bool{}
	for _, p := range all {
		if hasEnv(p.Env, "NOMAD_ALLOC_ID="+allocID) && hasEnv(p.Env, "NOMAD_TASK_NAME="+task) {
			isTask[p.PID] = true
		}
	}
	var found []procInfo
	for _, p := range all {
		if isTask[p.PID] && !isTask[p.Stat.PPID] {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return Proc{}, fmt.Errorf("no process of task %q of alloc %s", task, allocID)
	case 1:
		return Proc{PID: found[0].PID, StartTime: found[0].Stat.StartTime}, nil
	default:
		return Proc{}, fmt.Errorf("%d top processes of task %q of alloc %s: %v", len(found), task, allocID, found)
	}
}

// WaitForTask waits for an alloc's task process (FindTask) to appear.
func WaitForTask(t testing.TB, allocID, task string) Proc {
	t.Helper()
	var p Proc
	waitFor(t, 30*time.Second, fmt.Sprintf("the process of task %q of alloc %s", task, allocID), func() (bool, error) {
		var err error
		p, err = FindTask(allocID, task)
		return err == nil, err
	})
	return p
}

// CSIPaths are where a client mounts a volume (DESIGN.md §4): its staging
// dir, shared by the allocs of the node, and the publish dir of one alloc.
// The last element of each, the usage (access and attachment mode), is
// left out: a mount below the prefix is the volume's.
type CSIPaths struct {
	Staging, Publish string
}

// VolumePaths returns the host path prefixes of a volume's staging and
// publish mounts on a client.
func VolumePaths(client *Agent, pluginID, namespace, volumeID, allocID string) CSIPaths {
	base := filepath.Join(client.DataDir, "client", "csi", pluginID)
	return CSIPaths{
		Staging: filepath.Join(base, "staging", namespace, volumeID),
		Publish: filepath.Join(base, "per-alloc", allocID, volumeID),
	}
}
