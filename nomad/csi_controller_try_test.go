package nomad

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/shoenig/test/must"
)

// A controller call moves on to the next controller only from a client
// that did not take it or answered retryably. One whose session broke
// under the call may still run it, so the try ends there, marked
// errMayStillRun, whatever another controller would have answered (seed
// 26854: the next controller's InvalidArgument read as "nothing attached"
// while the first had attached). A final answer after a retryable one
// that reached a client is marked errTriedBefore.
func TestTryControllers_StopsWhereTheCallMayStillRun(t *testing.T) {
	broke := mayStillRun{structs.NewError(structs.CodeRetryable, "calling CSIController.Publish on node a: its session broke (EOF); retry")}
	noSession := notTaken{structs.NewError(structs.CodeRetryable, "node a is not connected to the leader (no node session); retry")}
	notHere := structs.NewError(structs.CodeRetryable, "node a: CSI plugin \"ebs\" has no controller running here")
	timedOut := structs.NewError(structs.CodeRetryable, "ControllerPublish of volume \"db\" by plugin \"ebs\" on node a: DeadlineExceeded")
	refused := structs.NewError(structs.CodeInvalid, "ControllerPublish: InvalidArgument")

	for _, tc := range []struct {
		name      string
		answers   map[string]error // by node; a node missing answers nil
		cancel    bool             // the caller stops waiting during node a's call
		wantCalls string
		wantCode  structs.ErrorCode // "" for success
		mayRun    bool
		tried     bool // the answer follows another controller's retryable one
	}{
		{name: "session broke under the call: no second controller",
			answers: map[string]error{"a": broke, "b": refused}, wantCalls: "a", wantCode: structs.CodeRetryable, mayRun: true},
		{name: "no session: the next controller answers",
			answers: map[string]error{"a": noSession, "b": refused}, wantCalls: "ab", wantCode: structs.CodeInvalid},
		{name: "no session: the next controller succeeds",
			answers: map[string]error{"a": noSession}, wantCalls: "ab"},
		{name: "the plugin's answer ends the try",
			answers: map[string]error{"a": refused}, wantCalls: "a", wantCode: structs.CodeInvalid},
		{name: "the caller stopped waiting",
			answers: map[string]error{"a": errors.New("context canceled")}, cancel: true, wantCalls: "a", mayRun: true},
		{name: "a plugin's retryable answer, then a final one: the earlier attempt counts",
			answers: map[string]error{"a": timedOut, "b": refused}, wantCalls: "ab", wantCode: structs.CodeInvalid, tried: true},
		{name: "no plugin there, then a final answer: counted too (the client took it)",
			answers: map[string]error{"a": notHere, "b": refused}, wantCalls: "ab", wantCode: structs.CodeInvalid, tried: true},
		{name: "nobody took it",
			answers: map[string]error{"a": noSession, "b": noSession}, wantCalls: "ab", wantCode: structs.CodeRetryable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var calls strings.Builder
			err := tryControllers(ctx, "ebs", "CSIController.Publish", []string{"a", "b"}, func(node string) error {
				calls.WriteString(node)
				if tc.cancel {
					cancel()
				}
				return tc.answers[node]
			})
			must.Eq(t, tc.wantCalls, calls.String(), must.Sprint("controllers called"))
			must.Eq(t, tc.mayRun, errors.Is(err, errMayStillRun), must.Sprintf("may still run: %v", err))
			must.Eq(t, tc.tried, errors.Is(err, errTriedBefore), must.Sprintf("tried before: %v", err))
			if tc.wantCode == "" && !tc.cancel {
				must.NoError(t, err)
				return
			}
			must.Error(t, err)
			if tc.wantCode != "" {
				must.Eq(t, tc.wantCode, structs.CodeOf(err), must.Sprintf("code of %v", err))
			}
		})
	}
}
