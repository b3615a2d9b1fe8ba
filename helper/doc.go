// Package helper holds small leaf utilities shared across Berth: IDs,
// backoff, SleepCtx. It imports only the standard library, and so do its
// sub-packages:
//
//   - helper/keylock: a mutex per key whose waits honour a context (one
//     operation at a time per volume or per controller target);
//   - helper/delayqueue: keys filed under a due time and handed out as they
//     come due (heartbeat deadlines, delayed evals, requeued volumes).
//
// Reach for these before writing another map of channels or timer heap.
package helper
