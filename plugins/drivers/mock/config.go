package mock

import (
	"time"

	"github.com/berth-io/berth/plugins/drivers"
)

// scriptConfig is a task's parsed driver config.
type scriptConfig struct {
	runFor        time.Duration
	exitCode      int
	startError    string
	startBlockFor time.Duration
	killAfter     time.Duration
	stdout        string
}

func parseConfig(cfg *drivers.TaskConfig) (*scriptConfig, error) {
	if err := drivers.CheckConfigKeys(cfg, Name,
		"run_for", "exit_code", "start_error", "start_block_for", "kill_after", "stdout_string"); err != nil {
		return nil, err
	}
	var sc scriptConfig
	var err error
	if sc.runFor, err = drivers.ConfigDuration(cfg, "run_for"); err != nil {
		return nil, err
	}
	if sc.exitCode, err = drivers.ConfigInt(cfg, "exit_code", 0); err != nil {
		return nil, err
	}
	if sc.startError, err = drivers.ConfigString(cfg, "start_error", false); err != nil {
		return nil, err
	}
	if sc.startBlockFor, err = drivers.ConfigDuration(cfg, "start_block_for"); err != nil {
		return nil, err
	}
	if sc.killAfter, err = drivers.ConfigDuration(cfg, "kill_after"); err != nil {
		return nil, err
	}
	if sc.stdout, err = drivers.ConfigString(cfg, "stdout_string", false); err != nil {
		return nil, err
	}
	return &sc, nil
}
