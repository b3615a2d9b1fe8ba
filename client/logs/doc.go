// Package logs keeps task output on disk with bounded size, and reads it
// back across rotated files.
//
// A task writes its stdout and stderr straight into files the driver opens
// (TaskConfig.StdoutPath/StderrPath): <alloc dir>/alloc/logs/<task>.stdout.0
// and <task>.stderr.0. The ".0" file is always the live one. The client
// rotates it from the outside (Rotator, a goroutine per task owned by the
// task runner's logs hook): once the live file is over MaxFileSize, its
// head is copied to the next numbered file (.1, .2, ... in the order they
// were cut) and then removed from the live file; the oldest numbered files
// are deleted beyond MaxFiles. Reading order is therefore .1, .2, ..., .N,
// then .0.
//
// Why not a pipe read by a log collector (Nomad's logmon)? The task
// outlives the client: while a restarted client is down nobody would read
// the pipe, and the task would block on a full pipe or die of SIGPIPE.
// Plain files need no reader, so a task keeps logging across a client
// restart and the new client's rotator just carries on from the sizes on
// disk; there is no in-memory state to lose.
//
// Removing the head of the live file uses fallocate(FALLOC_FL_COLLAPSE_RANGE)
// in whole filesystem blocks, which is atomic with respect to the task's
// appends, so nothing is lost or duplicated. Where the filesystem cannot
// collapse (tmpfs before 6.x, some network filesystems) the rotator falls
// back to copy-then-truncate, which can drop what the task writes in the
// instant between the last copy and the truncate.
//
// Requirement on drivers: open the log files with O_APPEND. A writer
// without it keeps its old offset after a rotation and leaves a hole of
// zero bytes in the live file.
package logs
