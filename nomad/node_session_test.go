package nomad_test

import (
	"context"
	"errors"
	"fmt"
	"net/rpc"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// The servers reach controller plugins through node sessions. Here the
// test plays the client: it opens a session to the leader and serves the
// NodeSession and CSIController endpoints with scripted answers.

type fakeIdentity struct{ id structs.NodeSessionIdentity }

func (f *fakeIdentity) Identify(_ *structs.NodeSessionIdentifyRequest, reply *structs.NodeSessionIdentity) error {
	*reply = f.id
	return nil
}

// fakeController is a client's CSIController endpoint.
type fakeController struct {
	// mu guards everything below.
	mu        sync.Mutex
	calls     []string // method names in call order
	publish   []*structs.ClientCSIControllerPublishRequest
	create    []*structs.ClientCSIControllerCreateRequest
	delete    []*structs.ClientCSIControllerDeleteRequest
	validate  []*structs.ClientCSIControllerValidateRequest
	snapshots []*structs.ClientCSIControllerSnapshotRequest
	expand    []*structs.ClientCSIControllerExpandRequest
	modify    []*structs.ClientCSIControllerModifyRequest
	// nodeExpansion is Expand's node_expansion_required.
	nodeExpansion bool
	// node, when set, serves CSINode on the session.
	node       *fakeNodeEndpoint
	errs       map[string][]error // next answers per method
	externalID string
}

func (f *fakeController) answer(method string) error {
	f.calls = append(f.calls, method)
	if q := f.errs[method]; len(q) > 0 {
		f.errs[method] = q[1:]
		if q[0] != nil {
			return structs.WireError(q[0])
		}
	}
	return nil
}

func (f *fakeController) script(method string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errs == nil {
		f.errs = map[string][]error{}
	}
	f.errs[method] = append(f.errs[method], errs...)
}

func (f *fakeController) CreateSnapshot(args *structs.ClientCSIControllerSnapshotRequest, reply *structs.ClientCSIControllerSnapshotResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapshots = append(f.snapshots, args)
	if err := f.answer("CreateSnapshot"); err != nil {
		return err
	}
	reply.Snapshots = []*structs.CSISnapshot{{ID: "snap-" + args.Name, ExternalSourceVolumeID: args.ExternalID,
		PluginID: args.PluginID, SizeBytes: 4096, CreateTime: 1700000000, IsReady: true}}
	return nil
}

func (f *fakeController) DeleteSnapshot(args *structs.ClientCSIControllerSnapshotRequest, _ *structs.ClientCSIControllerResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapshots = append(f.snapshots, args)
	return f.answer("DeleteSnapshot")
}

func (f *fakeController) ListSnapshots(args *structs.ClientCSIControllerSnapshotRequest, reply *structs.ClientCSIControllerSnapshotResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapshots = append(f.snapshots, args)
	if err := f.answer("ListSnapshots"); err != nil {
		return err
	}
	reply.Snapshots = []*structs.CSISnapshot{{ID: "snap-1", ExternalSourceVolumeID: "pv-db", PluginID: args.PluginID}}
	reply.NextToken = "2"
	return nil
}

func (f *fakeController) Publish(args *structs.ClientCSIControllerPublishRequest, reply *structs.ClientCSIControllerPublishResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publish = append(f.publish, args)
	if err := f.answer("Publish"); err != nil {
		return err
	}
	reply.PublishContext = map[string]string{"attached-to": args.ExternalNodeID}
	return nil
}

func (f *fakeController) Unpublish(args *structs.ClientCSIControllerUnpublishRequest, _ *structs.ClientCSIControllerResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answer("Unpublish")
}

func (f *fakeController) Validate(args *structs.ClientCSIControllerValidateRequest, _ *structs.ClientCSIControllerResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.validate = append(f.validate, args)
	return f.answer("Validate")
}

func (f *fakeController) Create(args *structs.ClientCSIControllerCreateRequest, reply *structs.ClientCSIControllerCreateResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.create = append(f.create, args)
	if err := f.answer("Create"); err != nil {
		return err
	}
	reply.ExternalID = f.externalID
	reply.CapacityBytes = 1 << 30
	reply.VolumeContext = map[string]string{"made-by": "fake"}
	return nil
}

func (f *fakeController) Delete(args *structs.ClientCSIControllerDeleteRequest, _ *structs.ClientCSIControllerResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delete = append(f.delete, args)
	return f.answer("Delete")
}

func (f *fakeController) Expand(args *structs.ClientCSIControllerExpandRequest, reply *structs.ClientCSIControllerExpandResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expand = append(f.expand, args)
	if err := f.answer("Expand"); err != nil {
		return err
	}
	reply.CapacityBytes = args.CapacityMin
	reply.NodeExpansionRequired = f.nodeExpansion
	return nil
}

func (f *fakeController) Modify(args *structs.ClientCSIControllerModifyRequest, _ *structs.ClientCSIControllerResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.modify = append(f.modify, args)
	return f.answer("Modify")
}

func (f *fakeController) modifies() []*structs.ClientCSIControllerModifyRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*structs.ClientCSIControllerModifyRequest(nil), f.modify...)
}

func (f *fakeController) methods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// openSession opens a node session for node to s's leader and serves ctrl
// on it; it returns a channel closed when the server ends the session.
func openSession(t *testing.T, s *cluster.Server, node *structs.Node, secret string, ctrl *fakeController) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := s.DialNodeSession(ctx)
	must.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	srv := rpc.NewServer()
	must.NoError(t, srv.RegisterName("NodeSession", &fakeIdentity{structs.NodeSessionIdentity{NodeID: node.ID, SecretID: secret}}))
	must.NoError(t, srv.RegisterName("CSIController", ctrl))
	if ctrl.node != nil {
		must.NoError(t, srv.RegisterName("CSINode", ctrl.node))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeCodec(msgpack.NewRPCCodec(conn))
	}()
	return done
}

// controllerNode is csiNode i whose hostpath controller creates volumes.
func controllerNode(i int) *structs.Node {
	n := csiNode(i, true)
	n.CSIControllerPlugins[hostpath].ControllerInfo.SupportsCreateDelete = true
	return n
}

func TestNodeSession_ControllerPublishAndUnpublishGoThroughTheSession(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	joinNode(t, s, node)
	ctrl := &fakeController{}
	// No session yet: the volume is registered without the controller's
	// check, with a warning that names the node the servers cannot reach.
	reply0 := registerVolumes(t, s, "", testVolume("db", hostpath))
	must.StrContains(t, reply0.Warnings, "node "+node.ID+" is not connected to the leader")
	must.StrContains(t, reply0.Warnings, "registered without that check")

	openSession(t, s, node, node.SecretID, ctrl)
	// With the session, a new volume is validated by the controller.
	testutil.WaitForResult(t, func() (bool, error) {
		var r structs.CSIVolumeRegisterResponse
		err := s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{testVolume("db2", hostpath)}}, &r)
		if err == nil && r.Warnings != "" {
			// not validated: deregister and try again once the session is up
			must.NoError(t, s.RPC("CSIVolume.Deregister", &structs.CSIVolumeDeregisterRequest{VolumeIDs: []string{"db2"}}, &structs.GenericResponse{}))
			return false, errors.New(r.Warnings)
		}
		return err == nil, err
	})
	ctrl.mu.Lock()
	must.Eq(t, "db2", ctrl.validate[0].ExternalID)
	must.Eq(t, structs.CSIVolumeAccessModeSingleNodeWriter, ctrl.validate[0].Capabilities[0].AccessMode)
	ctrl.mu.Unlock()

	a := claimedAlloc(t, s, "a")
	reply, err := csiClaim(s, claimRequest("db", a))
	must.NoError(t, err)
	ext := node.CSINodePlugins[hostpath].NodeInfo.ID
	must.Eq(t, map[string]string{"attached-to": ext}, reply.PublishContext)
	ctrl.mu.Lock()
	pub := ctrl.publish[0]
	ctrl.mu.Unlock()
	must.Eq(t, "db", pub.ExternalID)
	must.Eq(t, structs.CSIVolumeAccessModeSingleNodeWriter, pub.AccessMode)
	must.Eq(t, structs.CSISecrets{"password": "hunter2"}, pub.Secrets)

	// Stop: the node unpublishes, then the controller unpublishes through
	// the session, then the claim is freed.
	clientUpdate(t, s, a.ID, structs.AllocClientStatusComplete, true)
	must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))
	waitFreed(t, s, "db", a.ID)
	must.Eq(t, []string{"Validate", "Publish", "Unpublish"}, ctrl.methods())

	// A plugin that refuses the capabilities refuses the register.
	ctrl.script("Validate", structs.NewError(structs.CodeInvalid, "single-node-writer is not supported"))
	err = s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{testVolume("db3", hostpath)}},
		&structs.CSIVolumeRegisterResponse{})
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), `volume "db3": plugin "hostpath" did not confirm its capabilities`)
	must.StrContains(t, err.Error(), "single-node-writer is not supported")
}

func TestNodeSession_RefusesAWrongSecret(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	joinNode(t, s, node)
	done := openSession(t, s, node, "not-the-secret", &fakeController{})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server kept a session whose secret is wrong")
	}
	reply := registerVolumes(t, s, "", testVolume("db", hostpath))
	must.StrContains(t, reply.Warnings, "is not connected to the leader")
}

func TestNodeSession_NewLeaderGetsTheSessionAgain(t *testing.T) {
	servers := cluster.NewCluster(t, 3, func(_ int, c *nomad.Config) { csiConfig(nil)(c) })
	leader := cluster.WaitForLeader(t, servers...)
	node := controllerNode(0)
	joinNode(t, leader, node)
	ctrl := &fakeController{}
	done := openSession(t, leader, node, node.SecretID, ctrl)
	// validated registers volume id, and reports whether the controller
	// validated it (deregistering it again when not).
	validated := func(s *cluster.Server, id string) func() (bool, error) {
		return func() (bool, error) {
			var r structs.CSIVolumeRegisterResponse
			err := s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{testVolume(id, hostpath)}}, &r)
			if err != nil {
				return false, err
			}
			if r.Warnings != "" {
				must.NoError(t, s.RPC("CSIVolume.Deregister", &structs.CSIVolumeDeregisterRequest{VolumeIDs: []string{id}}, &structs.GenericResponse{}))
				return false, errors.New(r.Warnings)
			}
			return true, nil
		}
	}
	testutil.WaitForResult(t, validated(leader, "v1"))

	leader.Shutdown()
	select {
	case <-done: // the old leader ended the session
	case <-time.After(10 * time.Second):
		t.Fatal("the session outlived its server")
	}
	var rest []*cluster.Server
	for _, s := range servers {
		if s != leader {
			rest = append(rest, s)
		}
	}
	newLeader := cluster.WaitForLeader(t, rest...)
	// Until the client redials, the new leader cannot reach it, and says so.
	ok, verr := validated(newLeader, "v2")()
	must.False(t, ok)
	must.StrContains(t, verr.Error(), "not connected to the leader")
	openSession(t, newLeader, node, node.SecretID, ctrl)
	testutil.WaitForResult(t, validated(newLeader, "v2"))
}

func TestCSIVolumeCreate_RecordsCreatingAndFinishesOnRetry(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	joinNode(t, s, node)
	ctrl := &fakeController{externalID: "pv-123"}
	openSession(t, s, node, node.SecretID, ctrl)
	create := func() (*structs.CSIVolumeCreateResponse, error) {
		var reply structs.CSIVolumeCreateResponse
		err := s.RPC("CSIVolume.Create", &structs.CSIVolumeCreateRequest{Volumes: []*structs.CSIVolume{testVolume("db", hostpath)}}, &reply)
		return &reply, err
	}
	// The session may not be registered on the server yet: wait for a
	// controller answer (the scripted timeout).
	ctrl.script("Create", structs.NewError(structs.CodeRetryable, "deadline exceeded"))
	testutil.WaitForResult(t, func() (bool, error) {
		_, err := create()
		return err != nil && strings.Contains(err.Error(), "deadline exceeded"), err
	})
	_, err := create()
	must.NoError(t, err)
	// Both attempts asked for the same name: the plugin made one volume.
	ctrl.mu.Lock()
	must.Eq(t, 2, len(ctrl.create))
	must.Eq(t, ctrl.create[0].Name, ctrl.create[1].Name)
	ctrl.mu.Unlock()
	vol := getVolume(t, s, "", "db")
	must.Eq(t, structs.CSIVolumeStateReady, vol.State)
	must.Eq(t, "pv-123", vol.ExternalID)
	must.Eq(t, int64(1<<30), vol.Capacity)
	must.Eq(t, "fake", vol.Context["made-by"])

	// Creating it again is a conflict, not a second volume; the fix it
	// names never destroys data (delete would).
	_, err = create()
	must.ErrorIs(t, err, structs.ErrConflict)
	must.StrContains(t, err.Error(), "'berth volume deregister db'")
	must.StrNotContains(t, err.Error(), "volume delete")
}

func TestCSIVolumeCreate_RefusedByThePluginKeepsNothing(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	joinNode(t, s, node)
	ctrl := &fakeController{externalID: "pv-1"}
	openSession(t, s, node, node.SecretID, ctrl)
	ctrl.script("Create", structs.NewError(structs.CodeInvalid, "capacity 10 PiB is more than the pool holds"))
	var err error
	testutil.WaitForResult(t, func() (bool, error) {
		err = s.RPC("CSIVolume.Create", &structs.CSIVolumeCreateRequest{Volumes: []*structs.CSIVolume{testVolume("db", hostpath)}},
			&structs.CSIVolumeCreateResponse{})
		return err != nil && !errors.Is(err, structs.ErrRetryable), err
	})
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), `creating volume "db" with plugin "hostpath"`)
	must.StrContains(t, err.Error(), "more than the pool holds")
	v, serr := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "db")
	must.NoError(t, serr)
	must.Nil(t, v, must.Sprint("a volume the plugin refused to create is still registered"))
}

func TestCSIVolumeDelete_RefusedWhileClaimedThenDeletesThroughTheController(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	joinNode(t, s, node)
	ctrl := &fakeController{externalID: "pv-9"}
	openSession(t, s, node, node.SecretID, ctrl)
	testutil.WaitForResult(t, func() (bool, error) {
		err := s.RPC("CSIVolume.Create", &structs.CSIVolumeCreateRequest{Volumes: []*structs.CSIVolume{testVolume("db", hostpath)}},
			&structs.CSIVolumeCreateResponse{})
		return err == nil, err
	})
	a := claimedAlloc(t, s, "a")
	del := func() error {
		return s.RPC("CSIVolume.Delete", &structs.CSIVolumeDeleteRequest{VolumeID: "db"}, &structs.GenericResponse{})
	}
	err := del()
	must.ErrorIs(t, err, structs.ErrConflict)
	must.StrContains(t, err.Error(), fmt.Sprintf("alloc %s", a.ID[:8]))

	stopJob(t, s, "a", false)
	clientUpdate(t, s, a.ID, structs.AllocClientStatusComplete, true)
	must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))
	waitFreed(t, s, "db", a.ID)
	must.NoError(t, del())
	ctrl.mu.Lock()
	must.Eq(t, "pv-9", ctrl.delete[0].ExternalID)
	ctrl.mu.Unlock()
	v, serr := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "db")
	must.NoError(t, serr)
	must.Nil(t, v)
}

// Snapshots go to the plugin's controller through the session, only when
// it advertises them, with the volume's secrets; refusals name what is
// missing.
func TestCSISnapshots_ThroughTheController(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	joinNode(t, s, node)
	ctrl := &fakeController{}
	openSession(t, s, node, node.SecretID, ctrl)
	vol := testVolume("db", hostpath)
	vol.ExternalID = "pv-db"
	registerVolumes(t, s, "", vol)

	create := func() (*structs.CSISnapshotCreateResponse, error) {
		var reply structs.CSISnapshotCreateResponse
		err := s.RPC(structs.MethodCSIVolumeCreateSnapshot, &structs.CSISnapshotCreateRequest{
			Snapshots: []*structs.CSISnapshot{{SourceVolumeID: "db", Name: "nightly", Secrets: structs.CSISecrets{"extra": "x"}}}}, &reply)
		return &reply, err
	}
	// No CREATE_DELETE_SNAPSHOT: refused by name, nothing sent.
	_, err := create()
	must.ErrorIs(t, err, structs.ErrUnsupported)
	must.StrContains(t, err.Error(), `snapshotting volume "db": the controller of plugin "hostpath" does not advertise CREATE_DELETE_SNAPSHOT`)

	node = node.Copy()
	node.CSIControllerPlugins[hostpath].ControllerInfo.SupportsCreateDeleteSnapshot = true
	node.CSIControllerPlugins[hostpath].ControllerInfo.SupportsListSnapshots = true
	joinNode(t, s, node)
	var reply *structs.CSISnapshotCreateResponse
	testutil.WaitForResult(t, func() (bool, error) {
		reply, err = create()
		return err == nil, err
	})
	must.SliceLen(t, 1, reply.Snapshots)
	must.Eq(t, "snap-nightly", reply.Snapshots[0].ID)
	must.Eq(t, "db", reply.Snapshots[0].SourceVolumeID)
	ctrl.mu.Lock()
	sent := ctrl.snapshots[len(ctrl.snapshots)-1]
	ctrl.mu.Unlock()
	must.Eq(t, "pv-db", sent.ExternalID, must.Sprint("the plugin's own volume ID"))
	must.Eq(t, "hunter2", sent.Secrets["password"], must.Sprint("the volume's secrets"))
	must.Eq(t, "x", sent.Secrets["extra"], must.Sprint("and the request's"))

	// The plugin's refusal comes back with its words.
	ctrl.script("CreateSnapshot", structs.NewError(structs.CodeInvalid, "rpc error: code = FailedPrecondition desc = volume in use"))
	_, err = create()
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), "volume in use")

	var list structs.CSISnapshotListResponse
	must.NoError(t, s.RPC(structs.MethodCSIVolumeListSnapshots, &structs.CSISnapshotListRequest{
		PluginID: hostpath, QueryOptions: structs.QueryOptions{PerPage: 1}}, &list))
	must.SliceLen(t, 1, list.Snapshots)
	must.Eq(t, "db", list.Snapshots[0].SourceVolumeID, must.Sprint("Berth's volume named from the provider's ID"))
	must.Eq(t, "2", list.NextToken)
	err = s.RPC(structs.MethodCSIVolumeListSnapshots, &structs.CSISnapshotListRequest{}, &list)
	must.ErrorIs(t, err, structs.ErrInvalid)

	must.NoError(t, s.RPC(structs.MethodCSIVolumeDeleteSnapshot, &structs.CSISnapshotDeleteRequest{
		Snapshots: []*structs.CSISnapshot{{ID: "snap-nightly", PluginID: hostpath}}}, &structs.GenericResponse{}))
	ctrl.mu.Lock()
	must.Eq(t, "snap-nightly", ctrl.snapshots[len(ctrl.snapshots)-1].SnapshotID)
	ctrl.mu.Unlock()

	_, err = func() (*structs.CSISnapshotCreateResponse, error) {
		var r structs.CSISnapshotCreateResponse
		err := s.RPC(structs.MethodCSIVolumeCreateSnapshot, &structs.CSISnapshotCreateRequest{
			Snapshots: []*structs.CSISnapshot{{SourceVolumeID: "nope"}}}, &r)
		return &r, err
	}()
	must.ErrorIs(t, err, structs.ErrNotFound)
}

// fakeNodeEndpoint is a client's CSINode endpoint: it records expansions
// and answers scripted errors.
type fakeNodeEndpoint struct {
	mu      sync.Mutex
	expands []*structs.ClientCSINodeExpandRequest
	errs    []error
}

func (f *fakeNodeEndpoint) Expand(args *structs.ClientCSINodeExpandRequest, reply *structs.ClientCSINodeExpandResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expands = append(f.expands, args)
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		if err != nil {
			return structs.WireError(err)
		}
	}
	reply.CapacityBytes = args.CapacityMin
	return nil
}

func (f *fakeNodeEndpoint) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.expands)
}
