package structs

import (
	"errors"
	"fmt"
	"strings"
)

// ErrorCode classifies an error so that it survives a trip across RPC and
// can be mapped to an HTTP status without matching message text.
type ErrorCode string

const (
	CodeInternal         ErrorCode = "internal"          // HTTP 500
	CodeInvalid          ErrorCode = "invalid"           // HTTP 400: bad input
	CodeNotFound         ErrorCode = "not_found"         // HTTP 404
	CodePermissionDenied ErrorCode = "permission_denied" // HTTP 403
	CodeConflict         ErrorCode = "conflict"          // HTTP 409: e.g. volume still claimed
	CodeNoLeader         ErrorCode = "no_leader"         // HTTP 500, retryable
	CodeRetryable        ErrorCode = "retryable"         // try again later
	CodeNotReady         ErrorCode = "not_ready"         // "not yet": e.g. claim blocked by another claim
	// CodeUnsupported: a plugin does not implement what was asked (a CSI
	// RPC answered Unimplemented). Final, like CodeInvalid, but it also
	// tells the claim protocol that there is nothing to undo through that
	// RPC (HTTP 501).
	CodeUnsupported ErrorCode = "unsupported"
)

// Error is an error with a code. Messages name the object and, where there
// is one, the fix.
type Error struct {
	Code ErrorCode
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrNotFound) match any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Code == e.Code
}

// Sentinels for errors.Is; they carry only a code.
var (
	ErrInternal         = &Error{Code: CodeInternal}
	ErrInvalid          = &Error{Code: CodeInvalid}
	ErrNotFound         = &Error{Code: CodeNotFound}
	ErrPermissionDenied = &Error{Code: CodePermissionDenied}
	ErrConflict         = &Error{Code: CodeConflict}
	ErrNoLeader         = &Error{Code: CodeNoLeader, Msg: "no cluster leader"}
	ErrRetryable        = &Error{Code: CodeRetryable}
	ErrNotReady         = &Error{Code: CodeNotReady}
	ErrUnsupported      = &Error{Code: CodeUnsupported}
)

// NewError builds a coded error with a formatted message.
func NewError(code ErrorCode, format string, a ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, a...)}
}

// NotFound is the usual "<kind> not found" error, e.g. NotFound("volume", id).
func NotFound(kind, id string) *Error {
	if id == "" {
		return &Error{Code: CodeNotFound, Msg: kind + " not found"}
	}
	return &Error{Code: CodeNotFound, Msg: fmt.Sprintf("%s %q not found", kind, id)}
}

// CodeOf returns the code of the first *Error in err's chain, CodeInternal
// for any other non-nil error, and "" for nil.
func CodeOf(err error) ErrorCode {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// wireErrPrefix marks a coded error in net/rpc's string-only error field.
const wireErrPrefix = "\x00berth-err:"

// WireError encodes err for net/rpc: the code rides in a prefix that
// DecodeWireError strips again, so callers never parse message text.
func WireError(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(wireErrPrefix + string(CodeOf(err)) + "\x00" + err.Error())
}

// DecodeWireError turns an error returned by net/rpc back into an *Error
// with its code. Errors without the prefix (transport failures) are
// returned as they are.
func DecodeWireError(err error) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	if !strings.HasPrefix(s, wireErrPrefix) {
		return err
	}
	s = strings.TrimPrefix(s, wireErrPrefix)
	code, msg, ok := strings.Cut(s, "\x00")
	if !ok {
		return err
	}
	return &Error{Code: ErrorCode(code), Msg: msg}
}
