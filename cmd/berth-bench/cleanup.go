package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/api"
)

// jobsStopTimeout bounds waiting for stopped jobs to end and free claims.
const jobsStopTimeout = 2 * time.Minute

// cleanup undoes everything the bench did, in the order that keeps it
// safe, and reports each problem on the progress writer:
//
//	stop workload jobs ─► their allocs end, claims freed (the plugin unmounts)
//	  ─► stop the plugin job ─► its alloc ends ─► SIGINT the agent, wait
//	  ─► end processes left in the temp dir ─► unmount what is left under it
//	  ─► remove it (unless -keep)
//
// Tasks outlive their agent (the executor runs detached), hence the jobs
// are stopped first. It uses its own deadlines: ctx may be cancelled.
func (b *bench) cleanup() {
	b.progress("cleaning up...")
	if b.agent != nil {
		ctx, cancel := context.WithTimeout(context.Background(), jobsStopTimeout)
		if err := b.stopJobs(ctx); err != nil {
			b.progress("cleanup: %v", err)
		}
		cancel()
		if err := b.agent.stop(); err != nil {
			b.progress("cleanup: %v", err)
		}
	}
	for _, err := range killLeftovers(b.dir, b.cfg.berth) {
		b.progress("cleanup: %v", err)
	}
	for _, err := range unmountUnder(b.dir) {
		b.progress("cleanup: %v", err)
	}
	if b.cfg.keep {
		b.progress("kept %s (agent log: %s)", b.dir, filepath.Join(b.dir, "agent.log"))
		return
	}
	if err := os.RemoveAll(b.dir); err != nil {
		b.progress("cleanup: removing %s: %v", b.dir, err)
	}
}

// stopJobs stops the workload jobs, waits for their claims to be freed,
// then stops the plugin job and waits for its alloc.
func (b *bench) stopJobs(ctx context.Context) error {
	c := b.agent.api
	jobs, _, err := c.Jobs().List(nil)
	if err != nil {
		return fmt.Errorf("listing jobs: %w", err)
	}
	var errs []error
	stop := func(plugin bool) {
		for _, j := range jobs {
			if (j.ID == pluginJobID) != plugin || j.Stop {
				continue
			}
			if _, _, err := c.Jobs().Deregister(j.ID, false, nil); err != nil {
				errs = append(errs, fmt.Errorf("stopping job %s: %w", j.ID, err))
			}
		}
	}
	stop(false)
	if err := poll(ctx, b.agent.done, func() (bool, error) {
		vols, _, err := c.CSIVolumes().List(nil)
		if err != nil {
			return false, err
		}
		for _, v := range vols {
			if v.Claims > 0 {
				return false, fmt.Errorf("volume %s still has %d claims", v.ID, v.Claims)
			}
		}
		return allocsDone(c, func(id string) bool { return id != pluginJobID })
	}); err != nil {
		errs = append(errs, fmt.Errorf("waiting for the workloads to end: %w", err))
	}
	stop(true)
	if err := poll(ctx, b.agent.done, func() (bool, error) {
		return allocsDone(c, func(id string) bool { return id == pluginJobID })
	}); err != nil {
		errs = append(errs, fmt.Errorf("waiting for the plugin to end: %w", err))
	}
	return errors.Join(errs...)
}

// allocsDone reports whether every alloc of the jobs picked has ended on
// its client.
func allocsDone(c *api.Client, pick func(jobID string) bool) (bool, error) {
	allocs, _, err := c.Allocations().List(nil)
	if err != nil {
		return false, err
	}
	for _, a := range allocs {
		if pick(a.JobID) && !clientTerminal(a.ClientStatus) {
			return false, fmt.Errorf("alloc %s of job %s is %s", a.ID, a.JobID, a.ClientStatus)
		}
	}
	return true, nil
}

func clientTerminal(status string) bool {
	switch status {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// killLeftovers SIGKILLs, by PID, what the agent left running: processes
// whose working dir or root is inside dir (tasks, the plugin), and berth
// processes whose command line names dir (executors, the agent). Only
// processes of this bench live there: the dir is new.
func killLeftovers(dir, berth string) []error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []error{fmt.Errorf("reading /proc: %w", err)}
	}
	self := os.Getpid()
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if !livesIn(pid, dir, berth) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("killing left-over process %d: %w", pid, err))
		} else if err == nil {
			errs = append(errs, fmt.Errorf("killed left-over process %d (it lived in %s)", pid, dir))
		}
	}
	return errs
}

func livesIn(pid int, dir, berth string) bool {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	for _, link := range []string{"cwd", "root"} {
		if p, err := os.Readlink(filepath.Join(proc, link)); err == nil && inside(p, dir) {
			return true
		}
	}
	if exe, err := os.Readlink(filepath.Join(proc, "exe")); err != nil || exe != berth {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	return err == nil && strings.Contains(string(cmdline), dir+"/")
}

// inside reports whether path is dir or below it. It is pure.
func inside(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) []error {
	points, err := mountPointsUnder("/proc/self/mountinfo", dir)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errs
}

// mountPointsUnder reads a mountinfo file and returns the mount points at
// or below dir, deepest first.
func mountPointsUnder(mountinfo, dir string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if p := unescapeMountPath(fields[4]); inside(p, dir) {
			out = append(out, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	slices.SortFunc(out, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(out), nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
// It is pure.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
