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
