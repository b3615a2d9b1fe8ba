// Package rawexec is the raw_exec task driver: it runs the task's command
// directly on the host, as the client's user, with the task dir as its
// working directory and no isolation. It cannot mount volumes
// (Capabilities.MountConfig is "none").
//
// Config keys:
//
//	command  string, required: an absolute path, a path relative to the
//	         task dir, or a name looked up in the task's PATH
//	args     list of strings
//
// Tasks run under a detached executor and survive a client restart (see
// package executor).
package rawexec

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/executor"
	"github.com/berth-io/berth/plugins/drivers/internal/procdriver"
)

// Name is the driver's name in jobspecs.
const Name = "raw_exec"

// Config configures the driver.
type Config struct {
	// StateDir holds each task's executor directory (spec, status file,
	// executor log); it must survive client restarts. The client passes
	// one under its data_dir; "" means a directory under os.TempDir().
	StateDir string
	// ExecutorPath is the program run as the executor; "" means this
	// program.
	ExecutorPath string
}

// New returns the raw_exec driver.
func New(logger hclog.Logger, cfg Config) drivers.Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return procdriver.New(procdriver.Config{
		Name:         Name,
		Logger:       logger.Named(Name),
		StateDir:     cfg.StateDir,
		ExecutorPath: cfg.ExecutorPath,
		Capabilities: drivers.Capabilities{MountConfig: structs.MountConfigSupportNone},
		Fingerprint:  fingerprint,
		Spec:         spec,
	})
}

func fingerprint(context.Context) *structs.DriverInfo {
	return &structs.DriverInfo{
		Detected:          true,
		Healthy:           true,
		HealthDescription: "healthy",
		Attributes:        map[string]string{"driver.raw_exec": "1"},
	}
}

// spec validates the task's config and says what the executor runs.
func spec(cfg *drivers.TaskConfig) (*executor.Spec, error) {
	command, args, err := procdriver.Command(cfg, Name)
	if err != nil {
		return nil, err
	}
	if len(cfg.Mounts) > 0 {
		return nil, fmt.Errorf("task %q: the raw_exec driver cannot mount volumes (%d mounts asked); use exec", cfg.Name, len(cfg.Mounts))
	}
	if cfg.TaskDir == "" {
		return nil, fmt.Errorf("task %q: no task dir to run in", cfg.Name)
	}
	return &executor.Spec{
		TaskID:     cfg.ID,
		Command:    command,
		Args:       args,
		Env:        procdriver.Env(cfg.Env),
		Dir:        cfg.TaskDir,
		StdoutPath: cfg.StdoutPath,
		StderrPath: cfg.StderrPath,
	}, nil
}
