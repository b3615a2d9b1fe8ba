package claims

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

var (
	failureCalls = map[string]structs.CSIClaimStep{
		"controller-publish":   structs.CSIClaimReserved,
		"node-detach":          structs.CSIClaimTaken,
		"controller-unpublish": structs.CSIClaimNodeDetached,
	}
	failureClasses = []structs.ErrorCode{structs.CodeRetryable, structs.CodeNotReady, structs.CodeNoLeader,
		structs.CodeInternal, structs.CodeInvalid, structs.CodeNotFound, structs.CodeConflict, structs.CodeUnsupported}
)

// TestFailureTable checks testdata/failure.txt: every failed call × error
// class.
func TestFailureTable(t *testing.T) {
	f, err := os.Open("testdata/failure.txt")
	must.NoError(t, err)
	defer f.Close()
	retry := helper.Backoff{Base: time.Second, Max: time.Minute}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		must.SliceLen(t, 3, fields, must.Sprintf("line %d", line))
		call, class, want := fields[0], structs.ErrorCode(fields[1]), fields[2]
		step, ok := failureCalls[call]
		must.True(t, ok, must.Sprintf("line %d: unknown call %q", line, call))
		seen[call+" "+string(class)] = true
		cause := structs.NewError(class, "rpc error from the plugin")
		claim := stepClaim(step)
		claim.Attempts = 0
		if call == "controller-publish" {
			got, code := PublishFailed(claim, false, cause, stepNow, retry)
			must.Eq(t, structs.CSIClaimReserved, got.Step, must.Sprintf("line %d", line))
			must.Eq(t, 1, got.Attempts)
			must.StrContains(t, got.LastError, "rpc error from the plugin")
			if want == "retry" {
				must.Between(t, stepNow.UnixNano()+1, got.NextRetry, stepNow.Add(time.Second).UnixNano(), must.Sprintf("line %d", line))
				must.True(t, got.ControllerPublished, must.Sprintf("line %d: a retryable failure may have attached", line))
				must.True(t, code == structs.CodeRetryable || code == class, must.Sprintf("line %d: code %s", line, code))
				continue
			}
			must.Eq(t, "fail-alloc("+string(code)+")", want, must.Sprintf("line %d", line))
			must.False(t, got.ControllerPublished, must.Sprintf("line %d: a first, final refusal published nothing", line))
			must.Zero(t, got.NextRetry)
			continue
		}
		got := ReleaseFailed(claim, cause, stepNow, retry)
		must.Eq(t, 1, got.Attempts, must.Sprintf("line %d", line))
		switch want {
		case "retry":
			must.Eq(t, step, got.Step, must.Sprintf("line %d", line))
			must.Between(t, stepNow.UnixNano()+1, got.NextRetry, stepNow.Add(time.Second).UnixNano(), must.Sprintf("line %d", line))
		case "needs-operator", "unsupported":
			must.Eq(t, structs.CSIClaimNeedsOperator, got.Step, must.Sprintf("line %d", line))
			must.Eq(t, step, got.BlockedStep)
			must.Zero(t, got.NextRetry, must.Sprintf("line %d: never retried on a timer", line))
			must.Eq(t, want == "unsupported", got.Unsupported, must.Sprintf("line %d", line))
			must.True(t, claim.Step.CanMoveTo(got.Step), must.Sprintf("line %d: the store takes it", line))
		default:
			t.Fatalf("line %d: unknown result %q", line, want)
		}
	}
	must.NoError(t, sc.Err())
	for call := range failureCalls {
		for _, class := range failureClasses {
			must.True(t, seen[call+" "+string(class)], must.Sprintf("testdata/failure.txt lacks %s %s", call, class))
		}
	}
}

// A publish that failed retryably before may have attached the volume: a
// final answer later does not clear ControllerPublished, so the release
// still unpublishes. Errors without a code (a connection that dropped) are
// retried, never final.
func TestPublishFailed_EarlierAttemptKeepsPublished(t *testing.T) {
	retry := helper.Backoff{Base: time.Second, Max: time.Minute}
	c := stepClaim(structs.CSIClaimReserved)
	c, _ = PublishFailed(c, false, errors.New("connection reset"), stepNow, retry)
	must.Eq(t, Retry, Classify(errors.New("connection reset")))
	got, code := PublishFailed(c, false, structs.NewError(structs.CodeInvalid, "bad"), stepNow, retry)
	must.Eq(t, structs.CodeInvalid, code)
	must.True(t, got.ControllerPublished)
	must.Eq(t, 2, got.Attempts)
}

// A publish that succeeded but whose Taken write was lost (leadership
// moved) left the volume attached with no failed attempt on the claim: a
// final answer to the Claim's retry must not clear ControllerPublished
// either, or the release would free the claim still attached.
func TestPublishFailed_EarlierCallKeepsPublished(t *testing.T) {
	retry := helper.Backoff{Base: time.Second, Max: time.Minute}
	c := stepClaim(structs.CSIClaimReserved)
	c.ControllerPublished = true
	got, code := PublishFailed(c, true, structs.NewError(structs.CodeInvalid, "bad"), stepNow, retry)
	must.Eq(t, structs.CodeInvalid, code)
	must.True(t, got.ControllerPublished)
	got, _ = PublishFailed(c, false, structs.NewError(structs.CodeInvalid, "bad"), stepNow, retry)
	must.False(t, got.ControllerPublished, must.Sprint("the first call refused finally attached nothing"))
}
