package client

import (
	"fmt"

	"github.com/berth-io/berth/client/logs"
)

// AllocLogs opens a task's stdout or stderr ("stdout", "stderr") across
// its rotated files, oldest first. The caller closes the reader.
func (c *Client) AllocLogs(allocID, task, logType string) (*logs.Reader, error) {
	if !logs.ValidStream(logType) {
		return nil, fmt.Errorf("log type %q: %w", logType, ErrInvalidLogType)
	}
	r, err := c.runner(allocID)
	if err != nil {
		return nil, err
	}
	if !r.HasTask(task) {
		return nil, fmt.Errorf("alloc %s, task %q: %w", allocID, task, ErrUnknownTask)
	}
	return logs.Open(r.AllocDir().LogDir, task, logType)
}

// AllocTaskPIDs is the process ID of each running task of an alloc on
// this client, by task name (for /v1/client/allocation/:id/stats).
func (c *Client) AllocTaskPIDs(allocID string) (map[string]int, error) {
	r, err := c.runner(allocID)
	if err != nil {
		return nil, err
	}
	// Only runners with tasks have processes (a Minimal runner has none).
	if p, ok := r.(interface{ TaskPIDs() map[string]int }); ok {
		return p.TaskPIDs(), nil
	}
	return map[string]int{}, nil
}

// DataDir is the client's data directory, where alloc directories live.
func (c *Client) DataDir() string { return c.dataDir }
