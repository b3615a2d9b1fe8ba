package client

import "errors"

// Sentinel errors.
var (
	// ErrUnknownAlloc: the alloc does not run on this client.
	ErrUnknownAlloc = errors.New("alloc is not on this client")
	// ErrUnknownTask: the alloc has no task of that name.
	ErrUnknownTask = errors.New("alloc has no such task")
	// ErrInvalidLogType: the log type is neither stdout nor stderr.
	ErrInvalidLogType = errors.New("log type must be stdout or stderr")
	// ErrNoCommand: an exec named no command.
	ErrNoCommand = errors.New("no command given")
	// ErrTaskRequired: the alloc has several tasks and the request named
	// none.
	ErrTaskRequired = errors.New("the alloc has several tasks: name one")
	// ErrTaskNotRunning: the task has no running process.
	ErrTaskNotRunning = errors.New("task is not running")
)
