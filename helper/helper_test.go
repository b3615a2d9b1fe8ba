package helper

import (
	"regexp"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestUUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		id := UUID()
		must.True(t, re.MatchString(id), must.Sprintf("bad uuid %q", id))
		must.False(t, seen[id])
		seen[id] = true
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second, NoJitter: true}
	cases := []struct {
		attempt int
		want    time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{3, 800 * time.Millisecond},
		{4, time.Second},
		{40, time.Second},
	}
	for _, c := range cases {
		must.Eq(t, c.want, b.Delay(c.attempt))
	}
	j := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for range 100 {
		d := j.Delay(2)
		must.Between(t, 200*time.Millisecond, d, 400*time.Millisecond)
	}
}

func TestLogLimiter(t *testing.T) {
	l := NewLogLimiter(time.Hour)
	ok, held := l.Allow()
	if !ok || held != 0 {
		t.Fatalf("first line: got %v, %d; want it written", ok, held)
	}
	for range 3 {
		if ok, _ := l.Allow(); ok {
			t.Fatal("a second line within the interval was let through")
		}
	}
	l.last = l.last.Add(-2 * time.Hour)
	ok, held = l.Allow()
	if !ok || held != 3 {
		t.Fatalf("after the interval: got %v, %d; want written with 3 held back", ok, held)
	}
}
