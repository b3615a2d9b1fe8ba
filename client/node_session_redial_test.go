package client

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper"
)

// fakeLeader is a session dialler for redialer tests: dials fail while
// down, and it records when each dial came.
type fakeLeader struct {
	mu    sync.Mutex
	down  bool
	dials []time.Time
}

func (f *fakeLeader) dial(context.Context) (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials = append(f.dials, time.Now())
	if f.down {
		return nil, errors.New("connection refused")
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

func (f *fakeLeader) set(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeLeader) dialTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.dials...)
}

// runRedialer runs rd against f until the returned stop; a served session
// lasts until stop.
func runRedialer(rd redialer, f *fakeLeader) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rd.run(ctx, f.dial, func(conn net.Conn) { <-ctx.Done(); conn.Close() }, func(error) {})
	}()
	return func() { cancel(); <-done }
}

// TestRedialer_AServerAnswerCutsTheBackoffShort: after a minute of a
// down leader the redial backoff sits at its 5 s cap; when the partition
// heals, the first answer from a server (the client's next heartbeat)
// makes the client redial within the backoff's first step, not at the
// end of the 5 s. Without the answer it waits the cap out.
func TestRedialer_AServerAnswerCutsTheBackoffShort(t *testing.T) {
	backoff := helper.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second, NoJitter: true}
	for _, answer := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeLeader{down: true}
			rd := redialer{backoff: backoff, contact: make(chan struct{}, 1)}
			stop := runRedialer(rd, f)
			defer stop()

			time.Sleep(time.Minute)
			synctest.Wait()
			failed := len(f.dialTimes())
			// Not hammering a down leader: 100 ms doubling to 5 s is
			// 8 dials to reach the cap, then one per 5 s.
			must.Between(t, 10, failed, 20)

			f.set(false)
			healed := time.Now()
			if answer {
				rd.contact <- struct{}{}
			}
			time.Sleep(5 * time.Second)
			synctest.Wait()
			dials := f.dialTimes()
			must.SliceLen(t, failed+1, dials, must.Sprint("one more dial, which succeeded and is served"))
			took := dials[failed].Sub(healed)
			if answer {
				must.LessEq(t, backoff.Base, took, must.Sprintf("redialled %v after the answer", took))
			} else {
				must.Greater(t, backoff.Base, took, must.Sprintf("redialled %v after the heal with no answer", took))
			}
		})
	}
}

// TestRedialer_AStreamOfAnswersDoesNotHammer: servers answering other
// RPCs every 10 ms while session dials fail make the client dial at most
// once per backoff first step.
func TestRedialer_AStreamOfAnswersDoesNotHammer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backoff := helper.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}
		f := &fakeLeader{down: true}
		rd := redialer{backoff: backoff, contact: make(chan struct{}, 1)}
		stop := runRedialer(rd, f)
		defer stop()
		for range 1000 {
			time.Sleep(10 * time.Millisecond)
			select {
			case rd.contact <- struct{}{}:
			default:
			}
		}
		synctest.Wait()
		dials := f.dialTimes()
		// Jittered first step: 50–100 ms apart, so 100–200 dials in 10 s;
		// without the answers the backoff would have allowed ~10.
		must.Between(t, 90, len(dials), 201)
		for i := 1; i < len(dials); i++ {
			must.GreaterEq(t, backoff.Base/2, dials[i].Sub(dials[i-1]), must.Sprintf("dials %d and %d", i-1, i))
		}
	})
}

// TestClient_AnAnsweredRPCSignalsServerContact: c.rpc tells the node
// session a server answered, and a failed call does not.
func TestClient_AnAnsweredRPCSignalsServerContact(t *testing.T) {
	var fail bool
	c := &Client{cfg: &Config{RPC: rpcFunc(func(string, any, any) error {
		if fail {
			return errors.New("no route to host")
		}
		return nil
	})}, serverContact: make(chan struct{}, 1)}
	fail = true
	must.Error(t, c.rpc(context.Background(), "Node.UpdateStatus", &struct{}{}, &struct{}{}))
	must.Eq(t, 0, len(c.serverContact))
	fail = false
	must.NoError(t, c.rpc(context.Background(), "Node.UpdateStatus", &struct{}{}, &struct{}{}))
	must.Eq(t, 1, len(c.serverContact))
	// A second answer while the first is unread does not block.
	must.NoError(t, c.rpc(context.Background(), "Node.UpdateStatus", &struct{}{}, &struct{}{}))
	must.Eq(t, 1, len(c.serverContact))
}

type rpcFunc func(method string, args, reply any) error

func (f rpcFunc) RPC(method string, args, reply any) error { return f(method, args, reply) }
