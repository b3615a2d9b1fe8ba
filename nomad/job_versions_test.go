package nomad_test

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil/cluster"
)

func jobVersions(t *testing.T, s *cluster.Server, token, ns, id string) ([]*structs.Job, error) {
	t.Helper()
	req := &structs.JobVersionsRequest{JobID: id}
	req.Namespace, req.AuthToken = ns, token
	var reply structs.JobVersionsResponse
	err := s.RPC(structs.MethodJobGetJobVersions, req, &reply)
	return reply.Versions, err
}

func versionNumbers(vs []*structs.Job) []uint64 {
	out := []uint64{}
	for _, v := range vs {
		out = append(out, v.Version)
	}
	return out
}

func revert(s *cluster.Server, token, id string, version uint64, prior *uint64) (*structs.JobRegisterResponse, error) {
	req := &structs.JobRevertRequest{JobID: id, JobVersion: version, EnforcePriorVersion: prior}
	req.AuthToken = token
	var reply structs.JobRegisterResponse
	err := s.RPC(structs.MethodJobRevert, req, &reply)
	return &reply, err
}

func TestJob_VersionsAndRevert(t *testing.T) {
	s := cluster.NewServer(t, func(c *nomad.Config) { c.JobTrackedVersions = 3 })
	registerJob(t, s, testJob("web"))
	registerJob(t, s, testJob("web")) // identical: no new version
	for _, count := range []int{2, 3, 4} {
		j := testJob("web")
		j.TaskGroups[0].Count = count
		registerJob(t, s, j)
	}
	vs, err := jobVersions(t, s, "", "", "web")
	must.NoError(t, err)
	must.Eq(t, []uint64{3, 2, 1}, versionNumbers(vs), must.Sprint("the server's job_tracked_versions bounds them"))
	must.Eq(t, 4, vs[0].TaskGroups[0].Count)
	must.Eq(t, 2, vs[2].TaskGroups[0].Count)

	// Unknown job: no versions, not an error (the HTTP layer says 404).
	vs, err = jobVersions(t, s, "", "", "nope")
	must.NoError(t, err)
	must.SliceEmpty(t, vs)

	// Revert to version 1 (count 2): a new version 4 with that spec.
	reply, err := revert(s, "", "web", 1, nil)
	must.NoError(t, err)
	must.NotEq(t, "", reply.EvalID)
	cur := getJob(t, s, "", "web")
	must.Eq(t, 4, cur.Version)
	must.Eq(t, 2, cur.TaskGroups[0].Count)
	must.Eq(t, reply.JobModifyIndex, cur.JobModifyIndex)

	_, err = revert(s, "", "web", 4, nil)
	must.Eq(t, structs.CodeInvalid, structs.CodeOf(err))
	must.ErrorContains(t, err, "already at version 4")
	_, err = revert(s, "", "web", 0, nil)
	must.Eq(t, structs.CodeNotFound, structs.CodeOf(err))
	must.ErrorContains(t, err, "keep the last 3")
	prior := uint64(3)
	_, err = revert(s, "", "web", 2, &prior)
	must.Eq(t, structs.CodeConflict, structs.CodeOf(err))
	must.ErrorContains(t, err, "at version 4, not 3")
	_, err = revert(s, "", "nope", 0, nil)
	must.Eq(t, structs.CodeNotFound, structs.CodeOf(err))

	// Stable marks a kept version; an unknown one is NotFound.
	stable := &structs.JobStabilityRequest{JobID: "web", JobVersion: 3, Stable: true}
	must.NoError(t, s.RPC(structs.MethodJobStable, stable, &structs.GenericResponse{}))
	vs, err = jobVersions(t, s, "", "", "web")
	must.NoError(t, err)
	must.Eq(t, []uint64{4, 3, 2}, versionNumbers(vs))
	must.False(t, vs[0].Stable)
	must.True(t, vs[1].Stable)
	stable.JobVersion = 0
	err = s.RPC(structs.MethodJobStable, stable, &structs.GenericResponse{})
	must.Eq(t, structs.CodeNotFound, structs.CodeOf(err))
	must.ErrorContains(t, err, "no version 0 kept")

	// A purge drops the versions with the job.
	dereg := &structs.JobDeregisterRequest{JobID: "web", Purge: true}
	must.NoError(t, s.RPC(structs.MethodJobDeregister, dereg, &structs.JobDeregisterResponse{}))
	vs, err = jobVersions(t, s, "", "", "web")
	must.NoError(t, err)
	must.SliceEmpty(t, vs)
}

// TestJob_VersionsACL: reading versions needs read-job; reverting needs
// submit-job, and csi-mount-volume when the restored spec mounts a CSI
// volume, as registering that spec would.
func TestJob_VersionsACL(t *testing.T) {
	s, mgmt := aclServer(t)
	withVol := testJob("db")
	withVol.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {
		Name: "data", Type: structs.VolumeTypeCSI, Source: "data",
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
	}}
	req := &structs.JobRegisterRequest{Job: withVol}
	req.AuthToken = mgmt
	must.NoError(t, s.RPC(structs.MethodJobRegister, req, &structs.JobRegisterResponse{}))
	req = &structs.JobRegisterRequest{Job: testJob("db")}
	req.AuthToken = mgmt
	must.NoError(t, s.RPC(structs.MethodJobRegister, req, &structs.JobRegisterResponse{}))
	req = &structs.JobRegisterRequest{Job: testJob("db")}
	req.Job.Priority = 60
	req.AuthToken = mgmt
	must.NoError(t, s.RPC(structs.MethodJobRegister, req, &structs.JobRegisterResponse{}))

	applyPolicy(t, s, mgmt, "list", `namespace "default" { capabilities = ["list-jobs"] }`)
	applyPolicy(t, s, mgmt, "read", `namespace "default" { capabilities = ["read-job"] }`)
	applyPolicy(t, s, mgmt, "submit", `namespace "default" { capabilities = ["read-job", "submit-job"] }`)
	lister := createToken(t, s, mgmt, "lister", "list")
	reader := createToken(t, s, mgmt, "reader", "read")
	submitter := createToken(t, s, mgmt, "submitter", "submit")

	_, err := jobVersions(t, s, lister, "default", "db")
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err))
	vs, err := jobVersions(t, s, reader, "default", "db")
	must.NoError(t, err)
	must.Eq(t, []uint64{2, 1, 0}, versionNumbers(vs))

	_, err = revert(s, reader, "db", 1, nil)
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err))
	stable := &structs.JobStabilityRequest{JobID: "db", JobVersion: 1, Stable: true}
	stable.AuthToken = reader
	err = s.RPC(structs.MethodJobStable, stable, &structs.GenericResponse{})
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err))
	stable.AuthToken = submitter
	must.NoError(t, s.RPC(structs.MethodJobStable, stable, &structs.GenericResponse{}))
	_, err = revert(s, submitter, "db", 0, nil)
	must.Eq(t, structs.CodePermissionDenied, structs.CodeOf(err), must.Sprint("version 0 mounts a CSI volume"))
	must.ErrorContains(t, err, "csi-mount-volume")
	_, err = revert(s, submitter, "db", 1, nil)
	must.NoError(t, err)
	_, err = revert(s, mgmt, "db", 0, nil)
	must.NoError(t, err)
}
