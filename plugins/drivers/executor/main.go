package executor

import (
	"encoding/json"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Command is the CLI verb that runs an executor: Launch starts
// `<binary> executor <spec file>`, and `berth` registers the verb.
const Command = "executor"

// EnvReexec is set to "1" in every executor's environment. A test binary
// that starts tasks through the executor (its os.Executable is the test
// binary, not berth) calls RunIfExecutor first thing in TestMain, which
// checks it.
const EnvReexec = "BERTH_EXECUTOR"

// reportFD is the descriptor on which the executor tells Launch that the
// task started (or why not): the write end of a pipe, passed as the first
// extra file.
const reportFD = 3

// report is the executor's one message to Launch.
type report struct {
	TaskPID       int    `json:",omitempty"`
	TaskStartTime uint64 `json:",omitempty"`
	Error         string `json:",omitempty"`
}

// RunIfExecutor runs the executor and exits if this process was started as
// one (EnvReexec is "1"); otherwise it returns. Tests of packages that start
// tasks through the executor call it from TestMain:
//
//	func TestMain(m *testing.M) {
//		executor.RunIfExecutor()
//		os.Exit(m.Run())
//	}
//
// When it returns, it has set GORACE=atexit_sleep_ms=0 (unless GORACE is
// set) for the executors the tests start: under -race, an executor would
// otherwise sleep a second before exiting, and every wait for a task with
// it.
func RunIfExecutor() {
	if os.Getenv(EnvReexec) != "1" {
		if _, ok := os.LookupEnv("GORACE"); !ok {
			_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
		}
		return
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == Command {
		args = args[1:]
	}
	os.Exit(Main(args))
}

// Main is the executor process: args are the path of its spec file. It
// starts the task, reports to its client, waits for the task, writes the
// status file and returns the process exit code (0 once the status is
// written, 1 on failure, 2 on misuse). It logs to standard error, which
// Launch points at executor.log beside the spec.
func Main(args []string) int {
	if len(args) == 1 && args[0] == initArg {
		return initMain() // a task's init, started by its executor
	}
	logger := newExecLogger(os.Stderr)
	if len(args) != 1 {
		logger.Error("usage: berth executor <spec file>; the client starts this, do not call it directly")
		return 2
	}
	// The report pipe must not leak into the task: the client reads it
	// until EOF, which would then wait for the task to exit.
	if _, err := unix.FcntlInt(reportFD, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		logger.Error("no report pipe on fd 3: the client starts this, do not call it directly", "error", err)
		return 2
	}
	rep := os.NewFile(reportFD, "report")
	defer rep.Close()
	spec, err := readSpec(args[0])
	if err != nil {
		logger.Error("cannot run", "error", err)
		_ = sendReport(rep, &report{Error: err.Error()})
		return 1
	}
	return run(spec, rep, logger.With("task_id", spec.TaskID))
}

// sendReport writes the one report and closes the pipe. An error means the
// client is no longer listening.
func sendReport(f *os.File, r *report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sending report: %w", err)
	}
	return nil
}
