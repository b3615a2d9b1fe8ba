package volumewatcher

import (
	"time"

	metrics "github.com/hashicorp/go-metrics"

	"github.com/berth-io/berth/nomad/claims"
)

// gauges are the watcher's view of unfinished claims, set on every scan
// of the leader (claims by step are computed from state at scrape time
// by the agent, as berth_csi_claims{step}):
//
//	berth_csi_unpublish_backlog         claims of stopped allocs not yet freed
//	                                    (waiting, or being released)
//	berth_csi_unpublish_oldest_seconds  how long the oldest of them has been
//	                                    unfinished, as seen by this leader
type gauges struct {
	backlog int
	oldest  time.Duration
}

func (g gauges) emit() {
	metrics.SetGauge([]string{"csi", "unpublish", "backlog"}, float32(g.backlog))
	metrics.SetGauge([]string{"csi", "unpublish", "oldest_seconds"}, float32(g.oldest.Seconds()))
}

// countReleaseFailure counts one failed release call by its error class
// (claims.Classify: retry, stop, unsupported), as
// berth_csi_release_failures{call,class,plugin}: a class "retry" is one
// more retry, the others stop the claim at needs-operator.
func countReleaseFailure(call, pluginID string, err error) {
	metrics.IncrCounterWithLabels([]string{"csi", "release", "failures"}, 1, []metrics.Label{
		{Name: "call", Value: call}, {Name: "class", Value: claims.Classify(err).String()}, {Name: "plugin", Value: pluginID}})
}
