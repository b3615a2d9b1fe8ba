package executor

import (
	"encoding/json"
	"fmt"
	"os"
)

// Spec is what one executor runs. The client writes it as JSON into the
// task's executor directory; the executor reads it at start.
type Spec struct {
	// TaskID names the task in logs.
	TaskID string

	// Command is the program to run: an absolute path, a path relative to
	// Dir (if it holds a slash), or a name looked up in the PATH of Env.
	// With Isolation, all three are resolved inside Isolation.Root.
	Command string
	Args    []string
	// Env is the task's whole environment, as KEY=VALUE.
	Env []string
	// Dir is the task's working directory: a host path, or a path inside
	// Isolation.Root ("/" when empty).
	Dir string

	// StdoutPath and StderrPath are host files the task's output is
	// appended to (created if missing).
	StdoutPath string
	StderrPath string

	// StatusPath is where the executor writes the task's Status once it
	// has exited. Launch sets it.
	StatusPath string

	// Isolation, when set, runs the task in a private mount namespace,
	// chrooted into Isolation.Root. Nil runs it directly on the host.
	Isolation *Isolation

	// User, when set, is who the task runs as (the executor stays root).
	User *User
	// Caps, when not nil, is the task's capability bounding set: every
	// other capability is dropped before the task is started, so even a
	// root task can never hold it. Names are lowercase without "cap_"
	// ("net_bind_service").
	Caps []string
	// NewIPC runs the task in a new IPC namespace.
	NewIPC bool
	// NewPID runs the task in a new PID namespace under a small init
	// (init.go), with a /proc of its own: it sees only its own processes.
	// It needs Isolation.
	NewPID bool
}

// User is a task's user and groups.
type User struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32
}

// Isolation describes the root a task sees. See the package doc for the
// layout the executor builds.
type Isolation struct {
	// Root is the host directory the task sees as /.
	Root string
	// HostDirs are host directories bound read-only at the same path in
	// Root ("/usr", "/etc", ...). A host dir that is a symlink (a merged
	// /usr's /bin -> usr/bin) is recreated as the same symlink; one that
	// does not exist is skipped.
	HostDirs []string
	// Binds are read-write or read-only bind mounts of host paths into
	// Root: the task's volumes and the alloc dir.
	Binds []Bind
	// HidePIDs mounts the task's /proc with hidepid=invisible: a task sees
	// only the processes of its own user (not the agent's, nor other
	// tasks' under other users).
	HidePIDs bool
	// OwnDirs are directories below Root (task paths) chowned to User
	// before the task starts, so a task that is not root can use its own
	// task dir (which is 0700).
	OwnDirs []string
}

// Bind is one bind mount into the task's root.
type Bind struct {
	HostPath string
	TaskPath string // absolute, inside Root
	Readonly bool
	// Propagation is "private" (or ""), "host-to-task" or "bidirectional".
	Propagation string
}

// Propagation modes of a Bind, as jobspecs name them.
const (
	PropagationPrivate       = "private"
	PropagationHostToTask    = "host-to-task"
	PropagationBidirectional = "bidirectional"
)

// writeSpec writes spec as JSON to path (mode 0600: it holds the task's
// environment, which may hold secrets).
func writeSpec(path string, spec *Spec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding executor spec of task %q: %w", spec.TaskID, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing executor spec of task %q: %w", spec.TaskID, err)
	}
	return nil
}

// readSpec reads a spec written by writeSpec.
func readSpec(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading executor spec: %w", err)
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding executor spec %q: %w", path, err)
	}
	return &s, nil
}
