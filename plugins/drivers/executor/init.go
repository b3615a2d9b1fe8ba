package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A task with Spec.NewPID runs in a PID namespace of its own, under a
// small init: the executor's own binary re-executed as `executor -init`
// (initArg) with CLONE_NEWPID, so it is pid 1 there.
//
//	executor ──fork(NEWPID)──► init (pid 1) ──fork──► task (pid 2, own group)
//
// Init mounts a fresh /proc in the task's root (one that shows only the
// namespace), drops the bounding set, starts the task chrooted and as its
// user, forwards every signal it receives to the task's group, reaps what
// is orphaned in the namespace, and exits with the task's status once the
// task has ended: the kernel then kills whatever is left in the namespace.
//
// Init and the executor talk over a SOCK_SEQPACKET pair (fd 3 in init),
// one JSON message per packet; init reads its initSpec from a pipe (fd 4):
//
//	init → executor  {"Started":true} + the task's pidfd (SCM_RIGHTS)
//	                 or {"Error":"..."}
//	executor → init  {"Go":true} once it has read the task's host pid
//	init → executor  {"Exited":true,"ExitCode":n,"Signal":s}
//
// The task's pid as the host sees it comes from the pidfd's fdinfo, and
// init reaps nothing before the "Go": until then the task's /proc entry is
// there to read its start time from, even if it has already exited. The
// client knows the task by that host pid (State.TaskPID): signals from
// the client go to the task's group directly, and alloc exec enters the
// task's namespaces, the PID namespace among them.

// initArg, after Command, makes the executor's binary run as init.
const initArg = "-init"

// initCtlFD and initSpecFD are init's control socket and spec pipe.
const (
	initCtlFD  = 3
	initSpecFD = 4
)

// initSpec is what init runs: the task command the executor built,
// minus what init does itself.
type initSpec struct {
	Path string
	Args []string
	Env  []string
	Dir  string
	// Root is the task's chroot; init mounts its /proc there.
	Root     string
	HidePIDs bool
	// Cred is the task's user; nil keeps root.
	Cred *syscall.Credential
	// Caps is the bounding set, nil to keep all (Spec.Caps).
	Caps []string
}

// initMsg is one message on the control socket.
type initMsg struct {
	Error    string `json:",omitempty"`
	Started  bool   `json:",omitempty"`
	Go       bool   `json:",omitempty"`
	Exited   bool   `json:",omitempty"`
	ExitCode int    `json:",omitempty"`
	Signal   int    `json:",omitempty"`
}

// initProcess is a started init, as the executor holds it.
type initProcess struct {
	cmd  *exec.Cmd
	ctl  seqConn
	pid  int // the task's pid on the host
	stat procStat
}

// startInit starts init for the task command cmd (built by command, with
// its chroot, credentials and outputs) and returns once the task has
// started, with its host pid. On error nothing is left running.
func startInit(spec *Spec, cmd *exec.Cmd) (*initProcess, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating init's control socket: %w", err)
	}
	ctl, theirs := seqConn(fds[0]), os.NewFile(uintptr(fds[1]), "init-ctl")
	defer theirs.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("creating init's spec pipe: %w", err)
	}
	defer specR.Close()

	is := initSpec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir, Caps: spec.Caps,
		Root: cmd.SysProcAttr.Chroot, HidePIDs: spec.Isolation.HidePIDs, Cred: cmd.SysProcAttr.Credential}
	env := []string{EnvReexec + "=1"}
	if v, ok := os.LookupEnv("GORACE"); ok {
		env = append(env, "GORACE="+v)
	}
	ic := &exec.Cmd{
		// This very binary, whatever became of its path since it started.
		Path:       "/proc/self/exe",
		Args:       []string{os.Args[0], Command, initArg},
		Env:        env,
		Dir:        "/",
		Stdout:     cmd.Stdout,
		Stderr:     cmd.Stderr,
		ExtraFiles: []*os.File{theirs, specR}, // initCtlFD, initSpecFD
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:     true,
			Cloneflags:  cmd.SysProcAttr.Cloneflags | unix.CLONE_NEWPID,
			UseCgroupFD: cmd.SysProcAttr.UseCgroupFD,
			CgroupFD:    cmd.SysProcAttr.CgroupFD,
		},
	}
	err = ic.Start()
	specR.Close()
	if err == nil {
		err = json.NewEncoder(specW).Encode(&is)
	}
	specW.Close()
	ip := &initProcess{cmd: ic, ctl: ctl}
	if err != nil {
		ip.kill()
		return nil, fmt.Errorf("starting the task's init: %w", err)
	}
	if err := ip.started(); err != nil {
		ip.kill()
		return nil, err
	}
	return ip, nil
}

// started waits for init's word that the task started, and reads the
// task's host pid and start time from the pidfd init passes along.
func (ip *initProcess) started() error {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, err := ip.ctl.readMsg(buf, oob)
	if err != nil {
		return fmt.Errorf("reading the task's init: %w", err)
	}
	var fds []int
	if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, cm := range cms {
			if rights, err := unix.ParseUnixRights(&cm); err == nil {
				fds = append(fds, rights...)
			}
		}
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	var m initMsg
	if n == 0 {
		return errors.New("the task's init exited without starting the task")
	}
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		return fmt.Errorf("decoding the task's init's message %q: %w", buf[:n], err)
	}
	if m.Error != "" {
		return errors.New(m.Error)
	}
	if !m.Started || len(fds) != 1 {
		return fmt.Errorf("the task's init sent %q with %d fds, not the task's pidfd", buf[:n], len(fds))
	}
	pid, err := pidfdPID(fds[0])
	if err != nil {
		return err
	}
	st, err := readProcStat(pid)
	if err != nil {
		return fmt.Errorf("reading the task's start: %w", err)
	}
	ip.pid, ip.stat = pid, st
	return nil
}

// pidfdPID is the pid, in this process's PID namespace, of the process a
// pidfd refers to (its fdinfo's Pid line; -1 once it is reaped).
func pidfdPID(fd int) (int, error) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, fmt.Errorf("reading the task's pidfd: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("the task's pidfd names no live pid (%q)", line)
			}
			return pid, nil
		}
	}
	return 0, errors.New("the task's pidfd has no Pid line: this kernel is too old for exec's PID namespaces (5.12+ needed)")
}

// release lets init go on: reap, and end with the task.
func (ip *initProcess) release() error {
	b, _ := json.Marshal(initMsg{Go: true})
	if err := ip.ctl.write(b, nil); err != nil {
		return fmt.Errorf("releasing the task's init: %w", err)
	}
	return nil
}

// kill kills init, and with it every process in the namespace, and
// collects it.
func (ip *initProcess) kill() {
	if ip.cmd.Process != nil {
		_ = ip.cmd.Process.Kill()
		_ = ip.cmd.Wait()
	}
	ip.ctl.Close()
}

// wait waits for init to exit and returns how the task ended: as init
// reported it, or, if init died without a word (SIGKILL, which takes the
// whole namespace down), as init ended.
func (ip *initProcess) wait() *Status {
	err := ip.cmd.Wait()
	defer ip.ctl.Close()
	buf := make([]byte, 4096)
	// Init wrote its last message before exiting: it is queued, or there
	// is none and the closed peer reads as EOF.
	if n, _, rerr := ip.ctl.readMsg(buf, nil); rerr == nil && n > 0 {
		var m initMsg
		if json.Unmarshal(buf[:n], &m) == nil && m.Exited {
			st := &Status{ExitCode: m.ExitCode, Signal: m.Signal, FinishedAt: timeNow()}
			if m.Signal != 0 {
				st.ExitCode = -1
			}
			return st
		}
	}
	return statusOf(ip.cmd, err)
}

// initMain is init: see the top of this file. It returns init's exit
// code: the task's, 128+n if signal n killed it, 127 if it never ran.
func initMain() int {
	// Never unlocked: the bounding set is per thread, and the task is
	// forked from this one.
	runtime.LockOSThread()
	if typ, err := unix.GetsockoptInt(initCtlFD, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_SEQPACKET {
		fmt.Fprintln(os.Stderr, "berth init: no control socket on fd 3: the executor starts this, do not call it directly")
		return 2
	}
	unix.CloseOnExec(initCtlFD)
	ctl := seqConn(initCtlFD)
	send := func(m initMsg, rights []byte) {
		b, _ := json.Marshal(m)
		_ = ctl.write(b, rights)
	}
	fail := func(err error) int {
		send(initMsg{Error: fmt.Sprintf("starting the task in its PID namespace: %v", err)}, nil)
		return 127
	}
	// Catch every signal before the task exists, to pass it on. (A pid 1
	// gets no signal it has no handler for, SIGKILL from outside aside.)
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs)

	var is initSpec
	sf := os.NewFile(initSpecFD, "init-spec")
	err := json.NewDecoder(io.LimitReader(sf, 64<<20)).Decode(&is)
	sf.Close()
	if err != nil {
		return fail(fmt.Errorf("reading init's spec: %w", err))
	}
	if err := mountProc(is.Root, is.HidePIDs); err != nil {
		return fail(err)
	}
	if is.Caps != nil {
		if err := dropCaps(is.Caps); err != nil {
			return fail(err)
		}
	}
	pidfd := -1
	cmd := &exec.Cmd{
		Path:   is.Path,
		Args:   is.Args,
		Env:    is.Env,
		Dir:    is.Dir,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Chroot:     is.Root,
			Credential: is.Cred,
			Setpgid:    true, // signals go to the task's group, as without a namespace
			PidFD:      &pidfd,
		},
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	pid := cmd.Process.Pid
	send(initMsg{Started: true}, unix.UnixRights(pidfd))
	unix.Close(pidfd)
	// Reap nothing until the executor has read the task's pid: a reaped
	// task's /proc entry is gone.
	buf := make([]byte, 4096)
	_, _, _ = ctl.readMsg(buf, nil) // the Go, or EOF if the executor is gone

	go func() {
		for s := range sigs {
			sig, ok := s.(syscall.Signal)
			// SIGCHLD is ours; SIGURG is the Go runtime's own preemption;
			// SIGPIPE would be init writing to a gone executor.
			if !ok || sig == unix.SIGCHLD || sig == unix.SIGURG || sig == unix.SIGPIPE {
				continue
			}
			_ = unix.Kill(-pid, sig)
		}
	}()
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil { // ECHILD: cannot be while the task runs
			return fail(fmt.Errorf("waiting for the task: %w", err))
		}
		if wpid != pid {
			continue // an orphan of the task's, collected
		}
		m := initMsg{Exited: true}
		code := ws.ExitStatus()
		if ws.Signaled() {
			m.Signal = int(ws.Signal())
			code = 128 + m.Signal
		} else {
			m.ExitCode = code
		}
		send(m, nil)
		// Exiting takes the rest of the namespace down with us.
		return code
	}
}

// mountProc mounts a fresh /proc at root/proc: made in init, so it shows
// init's PID namespace.
func mountProc(root string, hidePIDs bool) error {
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening root %q: %w", root, err)
	}
	defer unix.Close(rootfd)
	fd, err := newProc(hidePIDs)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	s := &source{target: "/proc", fd: fd}
	return s.attach(rootfd)
}

// seqConn is one end of init's control socket, used with blocking system
// calls rather than through package net: net would make the executor (and
// init) import what initialises late in the berth binary (see package
// early), and two messages each way need no poller.
type seqConn int

// readMsg reads one packet and its control data; 0 bytes is EOF.
func (c seqConn) readMsg(buf, oob []byte) (n, oobn int, err error) {
	for {
		n, oobn, _, _, err = unix.Recvmsg(int(c), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			return n, oobn, err
		}
	}
}

// write sends one packet, with rights (SCM_RIGHTS) if not nil.
func (c seqConn) write(b, rights []byte) error {
	for {
		err := unix.Sendmsg(int(c), b, rights, nil, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

func (c seqConn) Close() error { return unix.Close(int(c)) }
