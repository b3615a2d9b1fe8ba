package hostpath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// flockExclusive takes an exclusive flock(2) on f, waiting until it is free
// or ctx is done. flock(2) itself cannot be cancelled, so it polls with a
// non-blocking lock and a short capped backoff; the lock is normally free or
// held for well under a millisecond.
func flockExclusive(ctx context.Context, f *os.File) error {
	fd := int(f.Fd())
	delay := 50 * time.Microsecond
	var timer *time.Timer
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK):
			return fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		if timer == nil {
			timer = time.NewTimer(delay)
			defer timer.Stop()
		} else {
			timer.Reset(delay)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("locking %s: %w", f.Name(), ctx.Err())
		case <-timer.C:
		}
		delay = min(2*delay, 10*time.Millisecond)
	}
}

func funlock(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		return fmt.Errorf("unlocking %s: %w", f.Name(), err)
	}
	return nil
}
