package compat

import (
	"testing"

	nomad "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// TestCompat_JobVersions: the upstream client's Versions decodes the kept
// versions and their diffs (what `nomad job history -p` prints), and
// Revert registers an old spec again, honouring EnforcePriorVersion.
func TestCompat_JobVersions(t *testing.T) {
	_, client := testAgent(t)
	_, _, err := client.Jobs().Register(sleepJob("hist", 1), nil)
	must.NoError(t, err)
	_, _, err = client.Jobs().Register(sleepJob("hist", 2), nil)
	must.NoError(t, err)

	versions, diffs, qm, err := client.Jobs().Versions("hist", true, nil)
	must.NoError(t, err)
	must.Positive(t, qm.LastIndex)
	must.SliceLen(t, 2, versions)
	for i, want := range []uint64{1, 0} {
		v := versions[i]
		must.Eq(t, want, *v.Version)
		must.NotNil(t, v.Stable)
		must.Positive(t, *v.SubmitTime)
		must.Eq(t, "hist", *v.ID)
	}
	must.Eq(t, 2, *versions[0].TaskGroups[0].Count)
	must.Eq(t, 1, *versions[1].TaskGroups[0].Count)
	must.SliceLen(t, 1, diffs)
	must.Eq(t, "Edited", diffs[0].Type)
	must.SliceLen(t, 1, diffs[0].TaskGroups)
	tg := diffs[0].TaskGroups[0]
	must.Eq(t, "Edited", tg.Type)
	must.Eq(t, "web", tg.Name)
	var count *nomad.FieldDiff
	for _, f := range tg.Fields {
		if f.Name == "Count" {
			count = f
		}
	}
	must.NotNil(t, count)
	must.Eq(t, "1", count.Old)
	must.Eq(t, "2", count.New)

	_, diffs, _, err = client.Jobs().Versions("hist", false, nil)
	must.NoError(t, err)
	must.SliceEmpty(t, diffs)

	wrong := uint64(0)
	_, _, err = client.Jobs().Revert("hist", 0, &wrong, nil, "", "")
	must.ErrorContains(t, err, "409")
	prior := uint64(1)
	resp, _, err := client.Jobs().Revert("hist", 0, &prior, nil, "", "")
	must.NoError(t, err)
	must.NotEq(t, "", resp.EvalID)
	job, _, err := client.Jobs().Info("hist", nil)
	must.NoError(t, err)
	must.Eq(t, 2, *job.Version)
	must.Eq(t, 1, *job.TaskGroups[0].Count)

	st, wm, err := client.Jobs().Stable("hist", 1, true, nil)
	must.NoError(t, err)
	must.Positive(t, wm.LastIndex)
	must.Eq(t, wm.LastIndex, st.JobModifyIndex)
	versions, _, _, err = client.Jobs().Versions("hist", false, nil)
	must.NoError(t, err)
	must.Eq(t, 1, *versions[1].Version)
	must.True(t, *versions[1].Stable)
	must.False(t, *versions[0].Stable)

	_, _, err = client.Jobs().Deregister("hist", true, nil)
	must.NoError(t, err)
	_, _, _, err = client.Jobs().Versions("hist", true, nil)
	must.ErrorContains(t, err, "404")
}
