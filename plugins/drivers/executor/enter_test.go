package executor

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func TestParseStatus(t *testing.T) {
	cases := []struct {
		name   string
		status string
		want   *taskView
		err    string
	}{
		{name: "nobody with groups",
			status: "Name:\tsh\nUid:\t65534\t65534\t65534\t65534\nGid:\t65533\t65533\t65533\t65533\nGroups:\t10 20 \nCapBnd:\t00000000a80425fb\n",
			want:   &taskView{uid: 65534, gid: 65533, groups: []uint32{10, 20}, capBnd: 0xa80425fb}},
		{name: "root without groups",
			status: "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\nCapBnd:\t000001ffffffffff\n",
			want:   &taskView{capBnd: 0x1ffffffffff}},
		{name: "no bounding set", status: "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n", err: "no CapBnd line"},
		{name: "bad uid", status: "Uid:\tx\nGid:\t0\nCapBnd:\t0\n", err: "bad Uid line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatus([]byte(tc.status))
			if tc.err != "" {
				must.ErrorContains(t, err, tc.err)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}

// TestEnterTask_Environment: a command entered into a process gets that
// process's working directory and environment, not the caller's.
func TestEnterTask_Environment(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("entering namespaces needs root")
	}
	dir := t.TempDir()
	task := exec.Command("/bin/sh", "-c", "read x")
	task.Dir = dir
	task.Env = []string{"PATH=/usr/bin:/bin", "TASK_MARKER=in-the-task"}
	stdin, err := task.StdinPipe()
	must.NoError(t, err)
	must.NoError(t, task.Start())
	t.Cleanup(func() { stdin.Close(); task.Wait() })

	var out bytes.Buffer
	cmd, err := EnterTask(EnterConfig{PID: task.Process.Pid, Argv: []string{"sh", "-c", "pwd; echo $TASK_MARKER"}, Stdout: &out, Stderr: &out})
	must.NoError(t, err)
	must.NoError(t, cmd.Wait())
	must.Eq(t, dir+"\nin-the-task\n", out.String())

	_, err = EnterTask(EnterConfig{PID: task.Process.Pid, Argv: []string{"no-such-command-here"}})
	must.ErrorContains(t, err, "no-such-command-here")
	must.True(t, strings.Contains(err.Error(), "PATH"))
}

// TestEnterTask_JoinsCgroup: a task in a cgroup of its own (as one with a
// read-only device is) has the entered command in that cgroup too, so the
// task's device filter and limits hold for it.
func TestEnterTask_JoinsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	root, err := cgroup2Root()
	if err != nil {
		t.Skipf("no cgroup v2 hierarchy: %v", err)
	}
	self, err := cgroup2Path("/proc/self/cgroup")
	must.NoError(t, err)
	cg := filepath.Join(root, self, fmt.Sprintf("berth-enter-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("cannot create a cgroup under %s: %v", root, err)
	}
	t.Cleanup(func() { os.Remove(cg) })

	task := exec.Command("/bin/sh", "-c", "read x")
	stdin, err := task.StdinPipe()
	must.NoError(t, err)
	must.NoError(t, task.Start())
	t.Cleanup(func() { stdin.Close(); task.Wait() })
	must.NoError(t, os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(task.Process.Pid)), 0o644))

	var out bytes.Buffer
	cmd, err := EnterTask(EnterConfig{PID: task.Process.Pid, Argv: []string{"cat", "/proc/self/cgroup"}, Stdout: &out, Stderr: &out})
	must.NoError(t, err)
	must.NoError(t, cmd.Wait())
	want := strings.TrimPrefix(cg, root)
	must.StrContains(t, out.String(), "0::"+want+"\n")
}
