package csi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/nomad/structs"
)

// Sentinel errors. Compare with errors.Is; never match error strings.
var (
	// ErrRetryable marks a failed RPC that may succeed if repeated later with
	// the same request: the plugin is down or restarting, an attempt timed
	// out (the operation may still be running in the plugin), another
	// operation on the volume is pending, or a publish raced an unpublish
	// elsewhere. The client already retried it; the caller retries on its own
	// schedule.
	ErrRetryable = errors.New("retryable csi error")

	// ErrFinal marks a failed RPC that will fail the same way until something
	// other than time changes: a bad request, a missing volume, an
	// unsupported capability, an incompatible existing publication.
	ErrFinal = errors.New("final csi error")

	// ErrInvalidRequest marks a request that failed Validate and was never
	// sent. It always comes together with ErrFinal.
	ErrInvalidRequest = errors.New("invalid csi request")

	// ErrNotConfirmed means ValidateVolumeCapabilities answered without
	// confirming every requested capability. It comes with ErrFinal.
	ErrNotConfirmed = errors.New("volume capabilities not confirmed by plugin")

	// ErrSocketPathTooLong is returned by New for a socket path that does not
	// fit in a unix socket address (MaxSocketPathLen bytes).
	ErrSocketPathTooLong = errors.New("unix socket path too long")

	// ErrClosed is returned for calls made after Close. It comes with
	// ErrFinal.
	ErrClosed = errors.New("csi client closed")
)

// Class is what a failed RPC means for the caller.
type Class int

const (
	// Final: do not repeat the request unchanged. The zero value, so that an
	// error nobody thought about is never retried or ignored.
	Final Class = iota
	// Retryable: repeat the request with backoff.
	Retryable
	// AlreadyDone: the plugin says the goal of the RPC already holds (e.g.
	// NotFound on an unpublish). The Client method returns nil.
	AlreadyDone
)

func (c Class) String() string {
	switch c {
	case Retryable:
		return "retryable"
	case AlreadyDone:
		return "already-done"
	default:
		return "final"
	}
}

// sentinel is the sentinel error an *Error of class c wraps.
func (c Class) sentinel() error {
	if c == Retryable {
		return ErrRetryable
	}
	return ErrFinal
}

// ServerCode is the error code a CSI failure crosses RPC with, for the
// servers to act on (structs.WireError carries it). It is the one mapping
// from CSI error classes to server codes:
//
//	nil                                   ""
//	ErrFinal with gRPC Unimplemented      CodeUnsupported: the plugin does not
//	                                       implement the RPC; nothing to undo
//	                                       through it (nomad/claims skips it on
//	                                       an operator's detach)
//	ErrFinal (Final, and AlreadyDone,     CodeInvalid: the request must change
//	  which no Client method returns)      before it can succeed; do not retry
//	ErrRetryable                          CodeRetryable
//	the caller's ctx ended (deadline or   CodeRetryable: the operation may
//	  cancel; no class)                    still run in the plugin
//	any other error (a local mount or     CodeRetryable: nothing says the
//	  directory failure around the RPCs)   request is wrong, and a claim whose
//	                                       release gave up would stay stuck
func ServerCode(err error) structs.ErrorCode {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrFinal) && grpcCode(err) == codes.Unimplemented:
		return structs.CodeUnsupported
	case errors.Is(err, ErrFinal):
		return structs.CodeInvalid
	default:
		return structs.CodeRetryable
	}
}

// publishRace lists the RPCs where the spec uses FAILED_PRECONDITION for a
// conflict with another publication that clears once that publication is
// undone, so the right reaction is to retry with backoff. Elsewhere
// FAILED_PRECONDITION is final (volume or snapshot in use on delete or expand,
// plugin unhealthy on Probe: a retry seconds later will not help and the
// caller must act).
//
// Retrying is never success: Berth reserves single-writer claims in the plan
// applier, so a conflict here means the plugin has not yet caught up with an
// unpublish Berth already finished (or is still finishing). Treating it as
// "already published" would put a single-node-writer volume on two nodes.
var publishRace = map[string]string{
	// "Volume published to another node": the previous node's detach may
	// still be in flight in the storage system.
	"ControllerPublishVolume": "volume published to another node",
	// "Exceeds capabilities ... or wait for the volume to be unpublished on
	// the node": a previous alloc's unstage may still be in flight.
	"NodeStageVolume": "volume staged elsewhere on the node",
	// Same as NodeStageVolume for a second target path. The spec also uses
	// FAILED_PRECONDITION for "staging target path not set", which a retry
	// cannot fix; bounded attempts make that mistake cheap, and Berth always
	// stages first when the plugin asks for it.
	"NodePublishVolume": "volume published at another target path",
}

// notFoundIsDone lists the RPCs whose goal holds when the plugin no longer
// knows the volume (or node, or snapshot): teardown is idempotent.
var notFoundIsDone = map[string]bool{
	"ControllerUnpublishVolume": true,
	"NodeUnstageVolume":         true,
	"NodeUnpublishVolume":       true,
	"DeleteVolume":              true,
	"DeleteSnapshot":            true,
}

// Classify says what err, returned by the CSI RPC method, means. method is
// the RPC's wire name ("NodePublishVolume") or its full gRPC method
// ("/csi.v1.Node/NodePublishVolume"). This is the one place Berth decides
// which CSI errors are retried; see the package doc.
func Classify(method string, err error) Class {
	if err == nil {
		return Final
	}
	method = rpcName(method)
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrInvalidRequest):
		return Final
	case errors.Is(err, context.DeadlineExceeded):
		// An attempt's own deadline: the operation may still be running.
		return Retryable
	case errors.Is(err, context.Canceled):
		return Final
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted:
		return Retryable
	case codes.FailedPrecondition:
		if _, ok := publishRace[method]; ok {
			return Retryable
		}
	case codes.NotFound:
		if notFoundIsDone[method] {
			return AlreadyDone
		}
	}
	return Final
}

// rpcName turns "/csi.v1.Node/NodePublishVolume" into "NodePublishVolume".
func rpcName(method string) string {
	return method[strings.LastIndexByte(method, '/')+1:]
}

// Error is the error every Client method returns for a failed RPC (except
// when the caller's ctx ended first). It wraps the gRPC status error, so
// status.Code(err) gives the plugin's code, and ErrRetryable or ErrFinal.
type Error struct {
	RPC        string // wire name, e.g. "NodePublishVolume"
	VolumeID   string // the volume's external ID or requested name, if any
	SnapshotID string // the snapshot's ID or requested name, if any
	Class      Class
	Attempts   int // attempts made; 0 when the request was never sent
	Err        error
}

func (e *Error) Error() string {
	attempts := ""
	if e.Attempts > 1 {
		attempts = fmt.Sprintf(" (%d attempts)", e.Attempts)
	}
	s := subject{volumeID: e.VolumeID, snapshotID: e.SnapshotID}
	return fmt.Sprintf("csi %s%s%s: %v", e.RPC, s.suffix(), attempts, e.Err)
}

// Unwrap exposes both the cause and the class sentinel to errors.Is/As.
func (e *Error) Unwrap() []error {
	return []error{e.Err, e.Class.sentinel()}
}

// subject names what an RPC acts on, for error messages.
type subject struct {
	volumeID, snapshotID string
}

func (s subject) suffix() string {
	var b strings.Builder
	if s.volumeID != "" {
		fmt.Fprintf(&b, " for volume %q", s.volumeID)
	}
	if s.snapshotID != "" {
		fmt.Fprintf(&b, " for snapshot %q", s.snapshotID)
	}
	return b.String()
}

func volume(id string) subject          { return subject{volumeID: id} }
func snapshot(id string) subject        { return subject{snapshotID: id} }
func snapshotOf(id, vol string) subject { return subject{volumeID: vol, snapshotID: id} }

// invalid wraps a Validate failure.
func invalid(rpc string, s subject, err error) error {
	return &Error{
		RPC: rpc, VolumeID: s.volumeID, SnapshotID: s.snapshotID,
		Class: Final,
		Err:   fmt.Errorf("%w: %w", ErrInvalidRequest, err),
	}
}

// attemptsError carries the attempt count from the retry interceptor to
// result, through the generated gRPC client code.
type attemptsError struct {
	attempts int
	err      error
}

func (e *attemptsError) Error() string { return e.err.Error() }
func (e *attemptsError) Unwrap() error { return e.err }

// result turns the error of one Client RPC into what the method returns:
// nil on success or AlreadyDone, a ctx error when the caller gave up, an
// *Error otherwise.
func result(ctx context.Context, rpc string, s subject, err error) error {
	if err == nil {
		return nil
	}
	attempts := 1
	var ae *attemptsError
	if errors.As(err, &ae) {
		attempts, err = ae.attempts, ae.err
	}
	if ctxErr := ctxDone(ctx); ctxErr != nil {
		return fmt.Errorf("csi %s%s: %w", rpc, s.suffix(), ctxErr)
	}
	class := Classify(rpc, err)
	if class == AlreadyDone {
		return nil
	}
	return &Error{
		RPC: rpc, VolumeID: s.volumeID, SnapshotID: s.snapshotID,
		Class: class, Attempts: attempts, Err: err,
	}
}

// grpcCode is the gRPC status code in err's chain, or codes.Unknown.
func grpcCode(err error) codes.Code {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := status.FromError(e); ok && s.Code() != codes.Unknown {
			return s.Code()
		}
	}
	return codes.Unknown
}
