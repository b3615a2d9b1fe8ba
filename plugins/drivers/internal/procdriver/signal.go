package procdriver

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// ParseSignal maps a signal name ("SIGTERM", "TERM", "sigint") to the
// signal; "" is SIGTERM.
func ParseSignal(name string) (unix.Signal, error) {
	if name == "" {
		return unix.SIGTERM, nil
	}
	n := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	if s := unix.SignalNum(n); s != 0 {
		return s, nil
	}
	return 0, fmt.Errorf("unknown signal %q", name)
}
