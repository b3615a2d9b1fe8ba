package main

import (
	"os"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestParseStatCPU(t *testing.T) {
	// utime 250 and stime 130 ticks; the command holds a space and a ')'.
	line := "4242 (berth (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 130 7 9 20 0 12 0 100 0 0\n"
	d, err := parseStatCPU([]byte(line))
	must.NoError(t, err)
	must.Eq(t, 3800*time.Millisecond, d, must.Sprint("utime + stime, not the children's fields"))

	_, err = parseStatCPU([]byte("4242 (berth) S 1 2"))
	must.Error(t, err)
	_, err = parseStatCPU([]byte("no parenthesis"))
	must.Error(t, err)
}

func TestProcCPUOfThisProcess(t *testing.T) {
	before, err := procCPU(os.Getpid())
	must.NoError(t, err)
	// Burn CPU until the clock-tick counter moves: a reading that never
	// grows would fail the deadline.
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, err := procCPU(os.Getpid())
		must.NoError(t, err)
		if now > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process's CPU time did not grow from %v in 10s of spinning", before)
		}
	}
}

func TestIsPluginCmd(t *testing.T) {
	root := "/tmp/bench-1/hostpath"
	must.True(t, isPluginCmd([]string{"/bin/berth", "plugin", "hostpath", "-mode", "node", "-root", root, "-node-id", "n"}, root))
	must.False(t, isPluginCmd([]string{"/bin/berth", "plugin", "hostpath", "-mode", "node", "-root", "/other", "-node-id", "n"}, root))
	must.False(t, isPluginCmd([]string{"/bin/berth", "agent", "-root", root}, root))
}
