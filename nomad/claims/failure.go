package claims

import (
	"errors"
	"fmt"
	"time"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

// ErrMayStillRun is in the chain of a failed call to a client that the
// client may still be running: the server stopped waiting for its answer
// (its context ended) or the node session broke under it. Only an answer
// from the client says its plugin call is over; until then a controller
// call may land up to the deadline it carried (PublishUntil,
// UnpublishUntil).
var ErrMayStillRun = errors.New("the call may still be running on the node")

// Outcome is what a failed call means for the claim it was made for.
type Outcome int

const (
	// Retry: the call may succeed later unchanged (the plugin or its node
	// is down or busy, a timeout, no leader). Retried with capped backoff,
	// with attempts, last error and next retry on the claim.
	Retry Outcome = iota
	// Stop: the plugin refused the request and will refuse it again
	// (InvalidArgument, NotFound, a persistent FailedPrecondition...).
	// Never retried on a timer.
	Stop
	// Unsupported: the plugin does not implement the call (Unimplemented).
	// Final like Stop; and nothing can be undone through that call.
	Unsupported
)

func (o Outcome) String() string {
	switch o {
	case Retry:
		return "retry"
	case Stop:
		return "stop"
	case Unsupported:
		return "unsupported"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Classify sorts a failed claim-path call by its structs error code. The
// gRPC code was classified once, in plugins/csi, and crossed RPC as that
// code; errors without one (a dropped connection, a timeout in transit)
// are retried, so that nothing unknown becomes final.
func Classify(err error) Outcome {
	switch structs.CodeOf(err) {
	case structs.CodeUnsupported:
		return Unsupported
	case structs.CodeInvalid, structs.CodeNotFound, structs.CodeConflict, structs.CodePermissionDenied:
		return Stop
	}
	return Retry
}

// ReleaseFailed is claim after a release call for it failed: one more
// attempt and the time of the next one for a retryable error, or
// NeedsOperator (remembering the step it stopped at) for a final one. The
// error should name the call, the node and the plugin.
func ReleaseFailed(claim *structs.CSIVolumeClaim, err error, now time.Time, retry helper.Backoff) *structs.CSIVolumeClaim {
	c := claim.Copy()
	c.Attempts++
	c.LastError = err.Error()
	switch o := Classify(err); o {
	case Retry:
		c.NextRetry = now.Add(retry.Delay(c.Attempts - 1)).UnixNano()
	default:
		if c.Step != structs.CSIClaimNeedsOperator {
			c.BlockedStep = c.Step
		}
		c.Step = structs.CSIClaimNeedsOperator
		c.Unsupported = o == Unsupported
		c.NextRetry = 0
	}
	return c
}

// PublishFailed is a reservation after ControllerPublish failed for it,
// and the error code to answer the client's Claim with. A retryable
// failure keeps the reservation (ControllerPublished: the call may have
// attached the volume) and the client retries. A final one is the alloc's
// end: the client fails it with the plugin's words, and the reservation no
// longer counts as published — unless an earlier attempt may have
// published it (it failed retryably: a timeout may have attached; or
// earlier, the caller's word that an attempt whose outcome it no longer
// knows was made, e.g. one that succeeded but whose Taken write was lost),
// so the release still controller-unpublishes.
func PublishFailed(reserved *structs.CSIVolumeClaim, earlier bool, err error, now time.Time, retry helper.Backoff) (*structs.CSIVolumeClaim, structs.ErrorCode) {
	c := reserved.Copy()
	earlier = earlier || c.Attempts > 0
	c.Attempts++
	c.LastError = err.Error()
	switch o := Classify(err); o {
	case Retry:
		c.NextRetry = now.Add(retry.Delay(c.Attempts - 1)).UnixNano()
		code := structs.CodeOf(err)
		if code != structs.CodeNotReady && code != structs.CodeNoLeader {
			code = structs.CodeRetryable
		}
		return c, code
	case Unsupported:
		c.ControllerPublished = c.ControllerPublished && earlier
		c.NextRetry = 0
		return c, structs.CodeUnsupported
	default:
		c.ControllerPublished = c.ControllerPublished && earlier
		c.NextRetry = 0
		return c, structs.CodeInvalid
	}
}
