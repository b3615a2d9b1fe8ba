package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU per claim cycle: the wall figures of this shared 2-core machine move
// with whatever else runs (load average 5 to 13 in one session), while the
// CPU the agent and the plugin spend per K=1 claim cycle (claim, stage,
// publish, task start, stop, unpublish, unstage, release, purge) moves
// only with Berth's own work: the firmer figure when comparing binaries.

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Berth runs on).
const clockTick = 10 * time.Millisecond

// procCPU is the CPU time (user + system, all threads) process pid has
// used so far, from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	return parseStatCPU(raw)
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command (field 2) is in parentheses and may
// hold spaces, so the fields are counted from its closing one.
func parseStatCPU(raw []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat line %q", raw)
	}
	f := strings.Fields(string(raw[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc stat line %q", raw)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc stat line %q: %w", raw, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// pluginPID finds the hostpath plugin process whose -root is root, by its
// command line; 0 when there is none.
func pluginPID(root string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range dirs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if isPluginCmd(args, root) {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			if err == nil {
				return pid
			}
		}
	}
	return 0
}

// isPluginCmd reports whether args run `berth plugin hostpath` with -root
// root.
func isPluginCmd(args []string, root string) bool {
	plugin := false
	for i, a := range args {
		if a == "plugin" && i+1 < len(args) && args[i+1] == "hostpath" {
			plugin = true
		}
		if plugin && a == "-root" && i+1 < len(args) && args[i+1] == root {
			return true
		}
	}
	return false
}

// cpuMeter samples the CPU of the agent and of the plugin process.
type cpuMeter struct {
	agentPID, pluginPID int
}

// sample returns the CPU both have used so far (the plugin's 0 when it was
// not found).
func (m cpuMeter) sample() (agent, plugin time.Duration, err error) {
	if agent, err = procCPU(m.agentPID); err != nil {
		return 0, 0, err
	}
	if m.pluginPID > 0 {
		if plugin, err = procCPU(m.pluginPID); err != nil {
			return 0, 0, err
		}
	}
	return agent, plugin, nil
}
