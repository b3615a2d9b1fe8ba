package nomad_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil/cluster"
)

// registerPluginNode registers node i running a healthy node instance of
// each plugin, which is how a plugin comes to exist.
func registerPluginNode(t *testing.T, s *cluster.Server, i int, pluginIDs ...string) *structs.Node {
	t.Helper()
	n := testNode(i)
	n.Status = structs.NodeStatusReady
	n.CSINodePlugins = map[string]*structs.CSIInfo{}
	for _, id := range pluginIDs {
		n.CSINodePlugins[id] = &structs.CSIInfo{
			PluginID: id, AllocID: fmt.Sprintf("plugin-alloc-%d-%s", i, id), Healthy: true,
			HealthDescription: "healthy", Provider: "org.example." + id, ProviderVersion: "1.2.3",
			NodeInfo: &structs.CSINodeInfo{ID: fmt.Sprintf("ext-node-%d", i)},
		}
	}
	var reply structs.NodeUpdateResponse
	must.NoError(t, s.RPC("Node.Register", &structs.NodeRegisterRequest{Node: n}, &reply))
	return n
}

func testVolume(id, pluginID string) *structs.CSIVolume {
	return &structs.CSIVolume{
		ID: id, Name: id, PluginID: pluginID,
		RequestedCapabilities: []*structs.CSIVolumeCapability{{
			AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		}},
		MountOptions: &structs.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}},
		Secrets:      structs.CSISecrets{"password": "hunter2"},
		Parameters:   map[string]string{"tier": "gold"},
	}
}

func registerVolumes(t *testing.T, s *cluster.Server, ns string, vols ...*structs.CSIVolume) *structs.CSIVolumeRegisterResponse {
	t.Helper()
	req := &structs.CSIVolumeRegisterRequest{Volumes: vols}
	req.Namespace = ns
	var reply structs.CSIVolumeRegisterResponse
	must.NoError(t, s.RPC("CSIVolume.Register", req, &reply))
	return &reply
}

// raftApply commits one entry the way the leader's own writers do; tests
// use it for writes whose RPCs belong to other issues (plans, claims).
func raftApply(t *testing.T, s *cluster.Server, mt structs.MessageType, req any) uint64 {
	t.Helper()
	buf, err := msgpack.Encode(mt, req)
	must.NoError(t, err)
	f := s.Raft().Apply(buf, 5*time.Second)
	must.NoError(t, f.Error())
	if err, ok := f.Response().(error); ok {
		t.Fatalf("applying message type %d: %v", mt, err)
	}
	return f.Index()
}

// placeClaimingAlloc places an alloc of job on nodeID with a claim on
// volume volID in the given step, as a plan would.
//
// The alloc carries the job as stored when it is registered, as a plan's
// alloc does. With the caller's copy (no namespace, no modify index) the
// alloc is an older version of the job, and the scheduler, which any
// write may unblock (this very placement changes a volume's claims),
// stops it as a destructive update; the volumewatcher then frees a
// reserved claim at once. Whether a test saw the claim then depended on
// load (TestCSIVolume_List/filter_on_claims failed that way).
func placeClaimingAlloc(t *testing.T, s *cluster.Server, job *structs.Job, allocID, nodeID, volID string, step structs.CSIClaimStep) {
	t.Helper()
	ns := job.Namespace
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	stored, err := s.State().JobByID(nil, ns, job.ID)
	must.NoError(t, err)
	if stored != nil {
		job = stored
	}
	raftApply(t, s, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{{
			ID: allocID, Namespace: job.Namespace, EvalID: "eval-" + allocID, Name: job.ID + ".web[0]",
			NodeID: nodeID, JobID: job.ID, Job: job, TaskGroup: "web",
		}},
		CSIClaims: []*structs.CSIVolumeClaimUpdate{{
			Namespace: job.Namespace, VolumeID: volID,
			Claim: &structs.CSIVolumeClaim{
				AllocID: allocID, JobID: job.ID, NodeID: nodeID, Mode: structs.CSIVolumeClaimWrite,
				AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
				Step:           step,
			},
		}},
		Timestamp: time.Now().UnixNano(),
	})
}

func setAllocClientStatus(t *testing.T, s *cluster.Server, allocID, status string) {
	t.Helper()
	raftApply(t, s, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{
		Alloc: []*structs.Allocation{{ID: allocID, ClientStatus: status}},
	})
}

func getVolume(t *testing.T, s *cluster.Server, ns, id string) *structs.CSIVolume {
	t.Helper()
	req := &structs.CSIVolumeGetRequest{ID: id}
	req.Namespace = ns
	var reply structs.CSIVolumeGetResponse
	must.NoError(t, s.RPC("CSIVolume.Get", req, &reply))
	return reply.Volume
}

func TestCSIVolume_RegisterAndGet(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath")

	vol := testVolume("vol-1", "hostpath")
	vol.RequestedTopologies = &structs.CSITopologyRequest{Required: []*structs.CSITopology{{Segments: map[string]string{"zone": "a"}}}}
	reply := registerVolumes(t, s, "", vol)
	must.Positive(t, reply.Index)
	must.SliceLen(t, 1, reply.Volumes)
	must.Nil(t, reply.Volumes[0].Secrets)
	must.Eq(t, []string{"[REDACTED]"}, reply.Volumes[0].MountOptions.MountFlags)
	// The answer is the volume as the entry stored it.
	must.Eq(t, reply.Index, reply.Volumes[0].ModifyIndex)
	must.Eq(t, reply.Index, reply.Volumes[0].CreateIndex)
	must.Eq(t, "org.example.hostpath", reply.Volumes[0].Provider)
	must.Eq(t, "hostpath", vol.PluginID) // the caller's volume is untouched
	must.Eq(t, "", vol.Provider)

	got := getVolume(t, s, "", "vol-1")
	must.NotNil(t, got)
	must.Eq(t, structs.DefaultNamespace, got.Namespace)
	must.Eq(t, "org.example.hostpath", got.Provider)
	must.Eq(t, "1.2.3", got.ProviderVersion)
	must.Eq(t, structs.CSIVolumeStateReady, got.State)
	must.Nil(t, got.Secrets, must.Sprint("secrets never leave the servers"))
	must.Eq(t, []string{"[REDACTED]"}, got.MountOptions.MountFlags)
	must.SliceLen(t, 1, got.Topologies)
	must.Positive(t, got.CreateTime)

	// The store keeps the secrets for the plugin, and the answer's
	// redaction left them (and the flags) as stored.
	stored, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "vol-1")
	must.NoError(t, err)
	must.Eq(t, "hunter2", stored.Secrets["password"])
	must.Eq(t, vol.MountOptions.MountFlags, stored.MountOptions.MountFlags)

	// Unknown volumes read as nil (the HTTP layer answers 404).
	must.Nil(t, getVolume(t, s, "", "nope"))
	// Another namespace does not see it.
	must.Nil(t, getVolume(t, s, "other", "vol-1"))
}

func TestCSIVolume_RegisterReportsEveryProblem(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath")

	bad := testVolume("bad", "hostpath")
	bad.RequestedCapabilities = nil
	bad.SnapshotID, bad.CloneID = "snap", "clone"
	unknownPlugin := testVolume("orphan", "no-such-plugin")
	req := &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{bad, unknownPlugin, testVolume("ok", "hostpath")}}
	err := s.RPC("CSIVolume.Register", req, &structs.CSIVolumeRegisterResponse{})
	must.True(t, errors.Is(err, structs.ErrInvalid), must.Sprintf("got %v", err))
	for _, want := range []string{
		`volume "bad" is invalid`,
		"must include at least one capability block",
		"only one of snapshot_id and clone_id",
		`volume "orphan": CSI plugin "no-such-plugin" is not known`,
		"berth plugin status",
	} {
		must.StrContains(t, err.Error(), want)
	}
	// All or none: the good volume was not registered either.
	must.Nil(t, getVolume(t, s, "", "ok"))

	err = s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{}, &structs.CSIVolumeRegisterResponse{})
	must.True(t, errors.Is(err, structs.ErrInvalid))

	dup := &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{testVolume("d", "hostpath"), testVolume("d", "hostpath")}}
	err = s.RPC("CSIVolume.Register", dup, &structs.CSIVolumeRegisterResponse{})
	must.StrContains(t, err.Error(), `volume "d" is given twice`)
}

func TestCSIVolume_RegisterUpdateRules(t *testing.T) {
	s := cluster.NewServer(t, nil)
	node := registerPluginNode(t, s, 1, "hostpath", "other")
	job := testJob("web")
	registerJob(t, s, job)

	cases := []struct {
		name    string
		claimed bool
		change  func(v *structs.CSIVolume)
		code    error    // nil: the update is allowed
		want    []string // in the error
	}{
		{name: "secrets replaced", claimed: true,
			change: func(v *structs.CSIVolume) { v.Secrets = structs.CSISecrets{"password": "new"} }},
		{name: "name and context change", claimed: true,
			change: func(v *structs.CSIVolume) { v.Name = "renamed"; v.Context = map[string]string{"a": "b"} }},
		{name: "mount options while unclaimed",
			change: func(v *structs.CSIVolume) { v.MountOptions = &structs.CSIMountOptions{FSType: "xfs"} }},
		{name: "capability added while claimed", claimed: true,
			change: func(v *structs.CSIVolume) {
				v.RequestedCapabilities = append(v.RequestedCapabilities, &structs.CSIVolumeCapability{
					AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem})
			}},
		{name: "plugin_id is fixed", code: structs.ErrInvalid,
			change: func(v *structs.CSIVolume) { v.PluginID = "other" },
			want:   []string{`plugin_id cannot change once registered (registered "hostpath", request has "other")`}},
		{name: "every fixed field at once", code: structs.ErrInvalid,
			change: func(v *structs.CSIVolume) {
				v.ExternalID = "ext-2"
				v.Parameters = map[string]string{"tier": "silver"}
				v.SnapshotID = "snap-1"
			},
			want: []string{"external_id cannot change", `parameters cannot change once registered (registered {tier="gold"}, request has {tier="silver"})`, "snapshot_id cannot change"}},
		{name: "capability in use dropped", claimed: true, code: structs.ErrConflict,
			change: func(v *structs.CSIVolume) {
				v.RequestedCapabilities = []*structs.CSIVolumeCapability{{
					AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
			},
			want: []string{`access_mode "single-node-writer" with attachment_mode "file-system", which live claims use (allocs alloc-`}},
		{name: "mount options while claimed", claimed: true, code: structs.ErrConflict,
			change: func(v *structs.CSIVolume) { v.MountOptions = &structs.CSIMountOptions{FSType: "xfs"} },
			want:   []string{"mount_options cannot change while the volume is claimed (allocs alloc-"}},
		{name: "fixed and claimed problems together are invalid", claimed: true, code: structs.ErrInvalid,
			change: func(v *structs.CSIVolume) { v.PluginID = "other"; v.MountOptions = nil },
			want:   []string{"plugin_id cannot change", "mount_options cannot change"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("vol-%d", i)
			registerVolumes(t, s, "", testVolume(id, "hostpath"))
			if tc.claimed {
				placeClaimingAlloc(t, s, job, fmt.Sprintf("alloc-%d", i), node.ID, id, structs.CSIClaimTaken)
			}
			update := testVolume(id, "hostpath")
			tc.change(update)
			err := s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{update}}, &structs.CSIVolumeRegisterResponse{})
			if tc.code == nil {
				must.NoError(t, err)
				stored, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, id)
				must.NoError(t, err)
				must.Eq(t, update.Secrets, stored.Secrets)
				must.Eq(t, update.Name, stored.Name)
				if tc.claimed {
					must.MapLen(t, 1, stored.Claims, must.Sprint("register keeps the claims"))
				}
				return
			}
			must.True(t, errors.Is(err, tc.code), must.Sprintf("got %v", err))
			for _, w := range tc.want {
				must.StrContains(t, err.Error(), w)
			}
		})
	}
}

func TestCSIVolume_RegisterKeepsSecretsAndFlagsOfAReadBackSpec(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath")
	registerVolumes(t, s, "", testVolume("v", "hostpath"))

	// What the API shows: no secrets, redacted flags. Registering it again
	// must not wipe what the plugin needs.
	readBack := getVolume(t, s, "", "v")
	registerVolumes(t, s, "", readBack)
	stored, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v")
	must.NoError(t, err)
	must.Eq(t, "hunter2", stored.Secrets["password"])
	must.Eq(t, []string{"noatime"}, stored.MountOptions.MountFlags)
}

func TestCSIVolume_Deregister(t *testing.T) {
	s := cluster.NewServer(t, nil)
	node := registerPluginNode(t, s, 1, "hostpath")
	job := testJob("web")
	registerJob(t, s, job)
	registerVolumes(t, s, "", testVolume("free", "hostpath"), testVolume("claimed", "hostpath"))
	placeClaimingAlloc(t, s, job, "alloc-1", node.ID, "claimed", structs.CSIClaimTaken)

	dereg := func(force bool, ids ...string) error {
		return s.RPC("CSIVolume.Deregister", &structs.CSIVolumeDeregisterRequest{VolumeIDs: ids, Force: force}, &structs.GenericResponse{})
	}
	err := dereg(false, "claimed")
	must.True(t, errors.Is(err, structs.ErrConflict), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), `volume "claimed"`)
	must.StrContains(t, err.Error(), "alloc-1")
	must.StrContains(t, err.Error(), "-force")

	// Force refuses while the alloc may still use the volume...
	err = dereg(true, "claimed")
	must.True(t, errors.Is(err, structs.ErrConflict))
	must.StrContains(t, err.Error(), "alloc is pending")
	// ...and drops the claim of a stopped one.
	setAllocClientStatus(t, s, "alloc-1", structs.AllocClientStatusComplete)
	must.NoError(t, dereg(true, "claimed"))

	err = dereg(false, "nope")
	must.True(t, errors.Is(err, structs.ErrNotFound))
	must.StrContains(t, err.Error(), `volume "nope" not found`)

	must.True(t, errors.Is(dereg(false), structs.ErrInvalid))
	must.NoError(t, dereg(false, "free"))
	must.Nil(t, getVolume(t, s, "", "free"))
}

// TestCSIVolume_GetIsExact: after "data" is deregistered, a read of
// "data" is not found — never "data-2" (a tool checking whether a volume
// still exists must not see another one).
func TestCSIVolume_GetIsExact(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath")
	registerVolumes(t, s, "", testVolume("data", "hostpath"), testVolume("data-2", "hostpath"), testVolume("logs", "hostpath"))

	must.Eq(t, "data", getVolume(t, s, "", "data").ID)
	must.Nil(t, getVolume(t, s, "", "lo"), must.Sprint("a unique prefix names nothing"))
	must.NoError(t, s.RPC("CSIVolume.Deregister", &structs.CSIVolumeDeregisterRequest{VolumeIDs: []string{"data"}}, &structs.GenericResponse{}))
	must.Nil(t, getVolume(t, s, "", "data"))
	must.Eq(t, "data-2", getVolume(t, s, "", "data-2").ID)
}

func listVolumes(t *testing.T, s *cluster.Server, req *structs.CSIVolumeListRequest) *structs.CSIVolumeListResponse {
	t.Helper()
	var reply structs.CSIVolumeListResponse
	must.NoError(t, s.RPC("CSIVolume.List", req, &reply))
	return &reply
}

func volumeIDs(stubs []*structs.CSIVolumeListStub) []string {
	ids := []string{}
	for _, v := range stubs {
		ids = append(ids, v.Namespace+"/"+v.ID)
	}
	return ids
}

func TestCSIVolume_List(t *testing.T) {
	s := cluster.NewServer(t, nil)
	node := registerPluginNode(t, s, 1, "a", "b")
	job := testJob("web")
	registerJob(t, s, job)
	registerVolumes(t, s, "", testVolume("v1", "a"), testVolume("v2", "b"), testVolume("w1", "a"))
	registerVolumes(t, s, "prod", testVolume("v1", "b"))
	placeClaimingAlloc(t, s, job, "alloc-1", node.ID, "v2", structs.CSIClaimReserved)

	cases := []struct {
		name string
		req  func(r *structs.CSIVolumeListRequest)
		want []string
	}{
		{"default namespace", func(r *structs.CSIVolumeListRequest) {}, []string{"default/v1", "default/v2", "default/w1"}},
		{"one namespace", func(r *structs.CSIVolumeListRequest) { r.Namespace = "prod" }, []string{"prod/v1"}},
		{"all namespaces", func(r *structs.CSIVolumeListRequest) { r.Namespace = "*" },
			[]string{"default/v1", "default/v2", "default/w1", "prod/v1"}},
		{"prefix", func(r *structs.CSIVolumeListRequest) { r.Namespace = "*"; r.Prefix = "v" },
			[]string{"default/v1", "default/v2", "prod/v1"}},
		{"plugin", func(r *structs.CSIVolumeListRequest) { r.PluginID = "a" }, []string{"default/v1", "default/w1"}},
		{"plugin and prefix", func(r *structs.CSIVolumeListRequest) { r.PluginID = "a"; r.Prefix = "w" }, []string{"default/w1"}},
		{"plugin in all namespaces", func(r *structs.CSIVolumeListRequest) { r.Namespace = "*"; r.PluginID = "b" },
			[]string{"default/v2", "prod/v1"}},
		{"node", func(r *structs.CSIVolumeListRequest) { r.NodeID = node.ID }, []string{"default/v2"}},
		{"node in another namespace", func(r *structs.CSIVolumeListRequest) { r.NodeID = node.ID; r.Namespace = "prod" }, []string{}},
		{"filter", func(r *structs.CSIVolumeListRequest) { r.Namespace = "*"; r.Filter = `PluginID == "b"` },
			[]string{"default/v2", "prod/v1"}},
		{"filter on claims", func(r *structs.CSIVolumeListRequest) { r.Filter = `Claims == 1` }, []string{"default/v2"}},
		{"reverse", func(r *structs.CSIVolumeListRequest) { r.Reverse = true }, []string{"default/w1", "default/v2", "default/v1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &structs.CSIVolumeListRequest{}
			tc.req(req)
			reply := listVolumes(t, s, req)
			must.Eq(t, tc.want, volumeIDs(reply.Volumes))
			must.Positive(t, reply.Index)
			must.True(t, reply.KnownLeader)
		})
	}

	err := s.RPC("CSIVolume.List", &structs.CSIVolumeListRequest{QueryOptions: structs.QueryOptions{Filter: `PluginID ==`}}, &structs.CSIVolumeListResponse{})
	must.True(t, errors.Is(err, structs.ErrInvalid), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), "invalid filter")
}

func TestCSIVolume_ListPages(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath")
	var vols []*structs.CSIVolume
	for i := range 5 {
		vols = append(vols, testVolume(fmt.Sprintf("vol-%d", i), "hostpath"))
	}
	registerVolumes(t, s, "", vols...)

	var pages [][]string
	var tokens []string
	req := &structs.CSIVolumeListRequest{QueryOptions: structs.QueryOptions{PerPage: 2}}
	for {
		reply := listVolumes(t, s, req)
		pages = append(pages, volumeIDs(reply.Volumes))
		tokens = append(tokens, reply.NextToken)
		if reply.NextToken == "" {
			break
		}
		req.NextToken = reply.NextToken
	}
	must.Eq(t, [][]string{
		{"default/vol-0", "default/vol-1"},
		{"default/vol-2", "default/vol-3"},
		{"default/vol-4"},
	}, pages)
	must.Eq(t, []string{"default.vol-2", "default.vol-4", ""}, tokens)

	// A token whose volume was deregistered in between still works.
	must.NoError(t, s.RPC("CSIVolume.Deregister", &structs.CSIVolumeDeregisterRequest{VolumeIDs: []string{"vol-2"}}, &structs.GenericResponse{}))
	reply := listVolumes(t, s, &structs.CSIVolumeListRequest{QueryOptions: structs.QueryOptions{PerPage: 2, NextToken: "default.vol-2"}})
	must.Eq(t, []string{"default/vol-3", "default/vol-4"}, volumeIDs(reply.Volumes))
	must.Eq(t, "", reply.NextToken)
}

func TestCSIVolume_ListBlocksUntilAWrite(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath")
	first := registerVolumes(t, s, "", testVolume("v1", "hostpath"))

	type result struct {
		reply structs.CSIVolumeListResponse
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = s.RPC("CSIVolume.List", &structs.CSIVolumeListRequest{QueryOptions: structs.QueryOptions{
			MinQueryIndex: first.Index, MaxQueryTime: 20 * time.Second,
		}}, &r.reply)
		done <- r
	}()
	second := registerVolumes(t, s, "", testVolume("v2", "hostpath"))
	select {
	case r := <-done:
		must.NoError(t, r.err)
		must.Eq(t, second.Index, r.reply.Index)
		must.Eq(t, []string{"default/v1", "default/v2"}, volumeIDs(r.reply.Volumes))
	case <-time.After(15 * time.Second):
		t.Fatal("blocking list did not return after a write")
	}
}

func TestCSIVolume_RegisterThroughAFollower(t *testing.T) {
	servers := cluster.NewCluster(t, 3, nil)
	leader := cluster.WaitForLeader(t, servers...)
	f := followers(servers, leader)[0]
	registerPluginNode(t, f, 1, "hostpath")
	registerVolumes(t, f, "", testVolume("v1", "hostpath"))
	got := getVolume(t, f, "", "v1") // forwarded to the leader: sees the write
	must.NotNil(t, got)
	must.Nil(t, got.Secrets)
	must.True(t, strings.HasPrefix(got.Provider, "org.example"))
}

// TestCSIVolume_RegisterHandedOverIsNotCopied: volumes handed over (the
// HTTP handler's) are filled in and committed as they are; the caller's
// own are copied first (TestCSIVolume_RegisterAndGet: untouched).
func TestCSIVolume_RegisterHandedOverIsNotCopied(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath")

	vol := testVolume("vol-1", "hostpath")
	req := &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{vol}}
	req.HandOverVolumes()
	var reply structs.CSIVolumeRegisterResponse
	must.NoError(t, s.RPC("CSIVolume.Register", req, &reply))
	must.Eq(t, structs.DefaultNamespace, vol.Namespace) // filled in place: no copy
	must.NotEq(t, "", vol.Provider)
	must.Eq(t, vol.Provider, getVolume(t, s, "", "vol-1").Provider)

	// The flag is never encoded: a request decoded off the wire copies.
	buf, err := msgpack.Encode(structs.CSIVolumeRegisterRequestType, req)
	must.NoError(t, err)
	var decoded structs.CSIVolumeRegisterRequest
	must.NoError(t, msgpack.Decode(buf[1:], &decoded))
	must.False(t, decoded.VolumesHandedOver())
}

// TestHandOff_LeaderStoresProposedMessage: a register through the
// leader stores the endpoint's volume itself instead of decoding its own
// entry (TestHandOff_RegisterRoundTripsEqual: what followers decode is
// equal), and the hand-off keeps nothing once the write is done.
func TestHandOff_LeaderStoresProposedMessage(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath")
	vol := testVolume("vol-1", "hostpath")
	req := &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{vol}}
	req.HandOverVolumes()
	var reply structs.CSIVolumeRegisterResponse
	must.NoError(t, s.RPC("CSIVolume.Register", req, &reply))
	stored, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "vol-1")
	must.NoError(t, err)
	must.True(t, stored == vol, must.Sprint("the leader decoded its own entry"))
	must.Eq(t, 0, s.HandOffPendingForTest())

	// A refused register leaves nothing behind either.
	bad := &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{testVolume("vol-2", "nope")}}
	must.Error(t, s.RPC("CSIVolume.Register", bad, &reply))
	must.Eq(t, 0, s.HandOffPendingForTest())
}
