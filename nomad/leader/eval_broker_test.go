package leader

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func brokerEval(id, job string, priority int) *structs.Evaluation {
	return &structs.Evaluation{ID: id, Namespace: "default", JobID: job, Priority: priority,
		Type: structs.JobTypeService, Status: structs.EvalStatusPending}
}

// dequeueNow takes a ready eval, failing the test if none is ready.
func dequeueNow(t *testing.T, b *evalBroker) (*structs.Evaluation, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Dequeue checks the ready heap before ctx
	e, token, err := b.Dequeue(ctx)
	must.NoError(t, err)
	return e, token
}

func mustBeEmpty(t *testing.T, b *evalBroker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := b.Dequeue(ctx)
	must.True(t, errors.Is(err, context.Canceled))
}

func TestEvalBroker_PriorityThenFIFO(t *testing.T) {
	b := newEvalBroker(3, 0, nil)
	b.Enqueue(brokerEval("low-1", "a", 10))
	b.Enqueue(brokerEval("high", "b", 90))
	b.Enqueue(brokerEval("low-2", "c", 10))
	b.Enqueue(brokerEval("mid", "d", 50))
	b.Enqueue(brokerEval("high", "b", 90)) // duplicate: ignored

	var got []string
	for range 4 {
		e, token := dequeueNow(t, b)
		got = append(got, e.ID)
		must.NoError(t, b.Ack(e.ID, token))
	}
	must.Eq(t, []string{"high", "mid", "low-1", "low-2"}, got)
	mustBeEmpty(t, b)
}

func TestEvalBroker_OneEvalPerJobInFlight(t *testing.T) {
	b := newEvalBroker(3, 0, nil)
	b.Enqueue(brokerEval("j1-a", "job1", 50))
	b.Enqueue(brokerEval("j1-b", "job1", 50))
	b.Enqueue(brokerEval("j2-a", "job2", 50))
	must.Eq(t, brokerStats{Ready: 2, Waiting: 1}, b.Stats())

	e1, t1 := dequeueNow(t, b)
	e2, t2 := dequeueNow(t, b)
	must.Eq(t, "j1-a", e1.ID)
	must.Eq(t, "j2-a", e2.ID)
	mustBeEmpty(t, b) // j1-b waits for j1-a

	must.Error(t, b.Ack(e1.ID, "wrong token"))
	must.NoError(t, b.Ack(e1.ID, t1))
	e3, t3 := dequeueNow(t, b)
	must.Eq(t, "j1-b", e3.ID)
	must.NoError(t, b.Ack(e3.ID, t3))
	must.NoError(t, b.Ack(e2.ID, t2))
	must.Eq(t, brokerStats{}, b.Stats())
}

func TestEvalBroker_NackRedeliversThenFails(t *testing.T) {
	b := newEvalBroker(2, 0, nil)
	b.Enqueue(brokerEval("e", "job", 50))
	b.Enqueue(brokerEval("next", "job", 50))

	e, token := dequeueNow(t, b)
	must.NoError(t, b.Nack(e.ID, token))
	e, token = dequeueNow(t, b) // redelivered, still ahead of "next"
	must.Eq(t, "e", e.ID)
	must.NoError(t, b.Nack(e.ID, token))

	failed, err := b.WaitFailed(context.Background())
	must.NoError(t, err)
	must.SliceLen(t, 1, failed)
	must.Eq(t, "e", failed[0].ID)
	next, _ := dequeueNow(t, b) // the job's next eval is free to go
	must.Eq(t, "next", next.ID)
}

func TestEvalBroker_Delays(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	b := newEvalBroker(3, time.Second, clock)
	later := brokerEval("later", "job", 50)
	later.WaitUntil = now.Add(time.Minute).UnixNano()
	b.Enqueue(later)
	b.Enqueue(brokerEval("now", "other", 50))
	must.Eq(t, brokerStats{Ready: 1, Delayed: 1}, b.Stats())

	e, token := dequeueNow(t, b)
	must.Eq(t, "now", e.ID)
	must.NoError(t, b.Nack(e.ID, token)) // back after the nack delay
	mustBeEmpty(t, b)
	must.Eq(t, now.Add(time.Second), b.promoteDue(now))

	now = now.Add(time.Second)
	must.Eq(t, time.Unix(1000, 0).Add(time.Minute), b.promoteDue(now))
	e, _ = dequeueNow(t, b)
	must.Eq(t, "now", e.ID)

	now = now.Add(time.Minute)
	must.Eq(t, time.Time{}, b.promoteDue(now))
	e, _ = dequeueNow(t, b)
	must.Eq(t, "later", e.ID)
}

func TestEvalBroker_RunPromotesDelayedEvals(t *testing.T) {
	b := newEvalBroker(3, 0, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	e := brokerEval("soon", "job", 50)
	e.WaitUntil = time.Now().Add(20 * time.Millisecond).UnixNano()
	b.Enqueue(e)
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	got, _, err := b.Dequeue(dctx) // blocks until Run promotes it
	must.NoError(t, err)
	must.Eq(t, "soon", got.ID)
	must.GreaterEq(t, e.WaitUntil, time.Now().UnixNano())
}

func TestEvalBroker_DequeueWaitsForWork(t *testing.T) {
	b := newEvalBroker(3, 0, nil)
	got := make(chan string, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e, _, err := b.Dequeue(ctx)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- e.ID
	}()
	b.Enqueue(brokerEval("x", "job", 50))
	must.Eq(t, "x", <-got)
	<-done
}

func TestEvalBroker_Flush(t *testing.T) {
	b := newEvalBroker(3, 0, nil)
	for i := range 5 {
		b.Enqueue(brokerEval(fmt.Sprint(i), "job", 50))
	}
	dequeueNow(t, b)
	b.flush()
	must.Eq(t, brokerStats{}, b.Stats())
	mustBeEmpty(t, b)
	b.Enqueue(brokerEval("0", "job", 50)) // forgotten, so accepted again
	e, _ := dequeueNow(t, b)
	must.Eq(t, "0", e.ID)
}
