package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// ClientAlloc is the node session's endpoint for alloc restart and alloc
// signal. It is registered only on the node session, whose peer is the
// leader the client dialled (and proved itself to): the servers have
// authorized the caller (alloc-lifecycle in the alloc's namespace) before
// calling, so the client trusts the request as it comes. Errors carry
// typed codes back to the servers.
type ClientAlloc struct{ c *Client }

// lifecycleRunner is what restart and signal need of an alloc runner;
// the real runner has it, the minimal one does not.
type lifecycleRunner interface {
	RestartTasks(ctx context.Context, task string) error
	SignalTasks(task, sig string) error
}

// Restart restarts a task (or all running tasks) of an alloc.
func (e *ClientAlloc) Restart(args *structs.AllocRestartRequest, _ *structs.GenericResponse) error {
	lr, err := e.c.lifecycleRunner(args.AllocID)
	if err != nil {
		return lifecycleWireError(err)
	}
	task := args.TaskName
	if args.AllTasks {
		task = ""
	}
	if err := lr.RestartTasks(context.Background(), task); err != nil {
		return lifecycleWireError(err)
	}
	e.c.logger.Info("alloc restart requested", "alloc_id", args.AllocID, "task", task)
	return nil
}

// Signal signals a task (or all running tasks) of an alloc.
func (e *ClientAlloc) Signal(args *structs.AllocSignalRequest, _ *structs.GenericResponse) error {
	lr, err := e.c.lifecycleRunner(args.AllocID)
	if err != nil {
		return lifecycleWireError(err)
	}
	if err := lr.SignalTasks(args.Task, args.Signal); err != nil {
		return lifecycleWireError(err)
	}
	e.c.logger.Info("alloc signal sent", "alloc_id", args.AllocID, "task", args.Task, "signal", args.Signal)
	return nil
}

func (c *Client) lifecycleRunner(allocID string) (lifecycleRunner, error) {
	r, err := c.runner(allocID)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", c.NodeID(), err)
	}
	lr, ok := r.(lifecycleRunner)
	if !ok {
		return nil, fmt.Errorf("alloc %s on node %s runs no tasks: %w", allocID, c.NodeID(), taskrunner.ErrSignalUnsupported)
	}
	return lr, nil
}

// lifecycleWireError gives err its code for the trip back to the servers.
func lifecycleWireError(err error) error {
	code := structs.CodeInternal
	switch {
	case errors.Is(err, ErrUnknownAlloc), errors.Is(err, allocrunner.ErrUnknownTask):
		code = structs.CodeNotFound
	case errors.Is(err, taskrunner.ErrTaskNotRunning):
		code = structs.CodeConflict
	case errors.Is(err, taskrunner.ErrSignalUnsupported):
		code = structs.CodeUnsupported
	case errors.Is(err, drivers.ErrInvalidConfig):
		code = structs.CodeInvalid
	}
	return structs.WireError(structs.NewError(code, "%v", err))
}
