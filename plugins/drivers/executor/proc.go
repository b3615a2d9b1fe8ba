package executor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// procStat is what the executor reads from /proc/<pid>/stat (proc(5)).
type procStat struct {
	// State is field 3: 'R', 'S', 'D', 'Z' (zombie), 'X' (dead), ...
	State byte
	// StartTime is field 22: when the process started, in clock ticks
	// since boot. A pid and its start time name one process for the life
	// of the machine: a reused pid has a later start time.
	StartTime uint64
}

// exited reports whether the process has ended (a zombie has ended; it
// only waits for its parent to collect it).
func (s procStat) exited() bool { return s.State == 'Z' || s.State == 'X' }

// errNoProcess: no process has that pid.
var errNoProcess = errors.New("no such process")

// readProcStat reads /proc/<pid>/stat. It returns errNoProcess when the pid
// is unused.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return procStat{}, errNoProcess
	}
	if err != nil {
		return procStat{}, fmt.Errorf("reading stat of pid %d: %w", pid, err)
	}
	return parseProcStat(b)
}

// parseProcStat parses the content of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may itself hold spaces and parentheses,
// so fields are counted from the last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("parsing /proc stat %q: no command name", b)
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state), so field 22 (starttime) is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("parsing /proc stat %q: too few fields", b)
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parsing /proc stat start time %q: %w", fields[19], err)
	}
	return procStat{State: fields[0][0], StartTime: start}, nil
}
