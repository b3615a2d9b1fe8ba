package command

import (
	"fmt"
	"time"

	"github.com/berth-io/berth/api"
)

// How long a call runs before the CLI says what it waits on, and how
// often it says it again. Tests shorten them.
var (
	progressFirst = 2 * time.Second
	progressEvery = 10 * time.Second
)

// whileWaiting runs call; if it takes longer than progressFirst, it prints
// to stderr (stdout stays for the result, and for -json) what the call
// waits on, every progressEvery, with the time so far. what names the
// operation ("creating volume \"db\""); detail, read again each time,
// says what the servers wait for right now.
func whileWaiting[T any](ui *UI, what string, detail func() string, call func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		done <- result{v, err}
	}()
	start := time.Now()
	timer := time.NewTimer(progressFirst)
	defer timer.Stop()
	for {
		select {
		case r := <-done:
			return r.v, r.err
		case <-timer.C:
			msg := fmt.Sprintf("Still %s (%s so far)", what, time.Since(start).Round(time.Second))
			if d := detail(); d != "" {
				msg += ": " + d
			}
			ui.Error("%s", msg)
			timer.Reset(progressEvery)
		}
	}
}

// controllerDetail says what a controller call of plugin id waits on: the
// plugin's controller instances, read now.
func controllerDetail(client *api.Client, pluginID, rpc string) func() string {
	return func() string {
		p, _, err := client.CSIPlugins().Info(pluginID, nil)
		if err != nil || p == nil {
			return fmt.Sprintf("waiting for plugin %q's controller to answer %s", pluginID, rpc)
		}
		if p.ControllersHealthy == 0 {
			return fmt.Sprintf("plugin %q has no healthy controller (%d expected): the call waits for one; check its controller job",
				pluginID, p.ControllersExpected)
		}
		return fmt.Sprintf("waiting for plugin %q's controller (%d of %d healthy) to answer %s",
			pluginID, p.ControllersHealthy, p.ControllersExpected, rpc)
	}
}
