package nomad

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/stream"
	"github.com/berth-io/berth/nomad/structs"
)

// FSM applies committed Raft entries to the state store. Each entry is one
// type byte (structs.MessageType) and a msgpack request; each apply
// function decodes it, makes one state store write at the entry's index,
// and returns that write's error (nil on success) as the entry's response.
// Apply is deterministic: every time and ID it writes comes in the
// request, stamped by the leader.
//
// Raft calls Apply, Snapshot and Restore from one goroutine;
// FSMSnapshot.Persist runs concurrently with Apply on a point-in-time view.
type FSM struct {
	logger hclog.Logger

	// state is the current store; Restore swaps in a new one, so readers
	// always go through State.
	state atomic.Pointer[state.StateStore]

	// halted is set once the FSM met an entry it must not skip and cannot
	// apply; from then on it applies nothing (see Apply). haltCh closes
	// then, so the server can stop.
	halted   atomic.Pointer[HaltError]
	haltCh   chan struct{}
	haltOnce sync.Once

	// events, when set, receives every committed write's events
	// (nomad/stream), from each store this FSM creates.
	events atomic.Pointer[stream.Broker]

	// applied counts the entries applied, by message type (flag
	// cleared), so a benchmark can say which writes an entry count is
	// made of.
	applied [256]atomic.Uint64

	// decoded holds, on the leader, the messages of entries this server
	// proposed, so applying them skips decoding what it just encoded
	// (see handOff).
	decoded handOff
}

// handOff passes a message from raftApply to the FSM on the same server:
// Raft hands the leader's FSM the very entry bytes given to Apply, so
// the first byte of an entry's body is its key. Only for message types
// whose encode → decode gives back an equal value (TestHandOff_*), so a
// leader stores exactly what its followers decode; and only a message
// nothing else touches once proposed. A register of 1,000 volumes spent
// a tenth of its CPU decoding its own entry.
type handOff struct {
	mu sync.Mutex
	m  map[*byte]any
}

func (h *handOff) put(body []byte, msg any) {
	h.mu.Lock()
	if h.m == nil {
		h.m = map[*byte]any{}
	}
	h.m[&body[0]] = msg
	h.mu.Unlock()
}

// take removes and returns the message of an entry body, if it was put.
func (h *handOff) take(body []byte) (any, bool) {
	if len(body) == 0 {
		return nil, false
	}
	h.mu.Lock()
	msg, ok := h.m[&body[0]]
	if ok {
		delete(h.m, &body[0])
	}
	h.mu.Unlock()
	return msg, ok
}

// Applied is how many entries of type t this FSM has applied (skipped
// unknown ones included) since it started.
func (f *FSM) Applied(t structs.MessageType) uint64 {
	return f.applied[uint8(t&^structs.IgnoreUnknownTypeFlag)].Load()
}

// SetEventBroker makes every later write publish its events to b.
func (f *FSM) SetEventBroker(b *stream.Broker) {
	f.events.Store(b)
	f.hookEvents(f.State())
}

func (f *FSM) hookEvents(store *state.StateStore) {
	b := f.events.Load()
	if b == nil {
		return
	}
	store.SetCommitHook(func(index uint64, changes memdb.Changes) {
		b.Publish(stream.FromChanges(index, changes))
	})
}

// HaltError is why an FSM stopped applying the log: the entry at Index
// has a message type this server does not know. It names the entry and
// what the operator can do.
type HaltError struct {
	Index uint64
	Type  uint8
}

func (e *HaltError) Error() string {
	return fmt.Sprintf("raft entry %d has message type %d, which this server does not know, "+
		"so it stopped applying the log rather than diverge from the other servers. "+
		"If the entry comes from a newer Berth, upgrade this server. If it should not be there "+
		"(a forged or corrupt entry), stop this server, move its data_dir/server/raft aside, "+
		"and add it back with `berth operator raft remove-peer` and `add-peer` so it copies the "+
		"state from the leader; on a single server, restart from a backup of data_dir taken before entry %d",
		e.Index, e.Type, e.Index)
}

// Halted returns a channel closed once the FSM halts, and the reason.
func (f *FSM) Halted() (<-chan struct{}, *HaltError) { return f.haltCh, f.halted.Load() }

var _ raft.FSM = (*FSM)(nil)

// NewFSM returns an FSM over an empty state store.
func NewFSM(logger hclog.Logger) (*FSM, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	logger = logger.Named("fsm")
	store, err := state.NewStateStore(logger)
	if err != nil {
		return nil, fmt.Errorf("creating fsm: %w", err)
	}
	f := &FSM{logger: logger, haltCh: make(chan struct{})}
	f.state.Store(store)
	return f, nil
}

// State returns the current state store. After a snapshot restore it is
// a new store; the old one's AbandonCh is closed.
func (f *FSM) State() *state.StateStore { return f.state.Load() }

// Apply applies one committed entry. An entry of a type this server does
// not know is skipped when the type carries structs.IgnoreUnknownTypeFlag;
// otherwise the FSM halts: applying the rest of the log without it would
// silently diverge from the servers that know it, and panicking would
// crash-loop a disk server that replays the entry on every start. A
// halted FSM answers every later entry with its HaltError and applies
// nothing; the server sees Halted and stops.
func (f *FSM) Apply(log *raft.Log) any {
	if h := f.halted.Load(); h != nil {
		return h
	}
	if len(log.Data) == 0 {
		return fmt.Errorf("applying raft entry %d: empty entry", log.Index)
	}
	msgType := structs.MessageType(log.Data[0])
	buf, index := log.Data[1:], log.Index
	// The flag says what to do if the type is unknown; a known type is
	// applied whether or not it carries the flag.
	ignoreUnknown := msgType&structs.IgnoreUnknownTypeFlag != 0
	msgType &^= structs.IgnoreUnknownTypeFlag
	f.applied[uint8(msgType)].Add(1)

	var err error
	switch msgType {
	case structs.NodeRegisterRequestType:
		err = f.applyNodeRegister(buf, index)
	case structs.NodeDeregisterRequestType:
		err = f.applyNodeDeregister(buf, index)
	case structs.NodeUpdateStatusRequestType:
		err = f.applyNodeUpdateStatus(buf, index)
	case structs.NodeUpdateDrainRequestType:
		err = f.applyNodeUpdateDrain(buf, index)
	case structs.NodeUpdateEligibilityRequestType:
		err = f.applyNodeUpdateEligibility(buf, index)
	case structs.NodeBatchUpdateStatusRequestType:
		err = f.applyNodeBatchUpdateStatus(buf, index)
	case structs.JobRegisterRequestType:
		err = f.applyJobRegister(buf, index)
	case structs.JobDeregisterRequestType:
		err = f.applyJobDeregister(buf, index)
	case structs.JobStabilityRequestType:
		err = f.applyJobStability(buf, index)
	case structs.EvalUpdateRequestType:
		err = f.applyEvalUpdate(buf, index)
	case structs.EvalDeleteRequestType:
		err = f.applyEvalDelete(buf, index)
	case structs.AllocClientUpdateRequestType:
		err = f.applyAllocClientUpdate(buf, index)
	case structs.ApplyPlanResultsRequestType:
		err = f.applyPlanResults(buf, index)
	case structs.AllocDeleteRequestType:
		err = f.applyAllocDelete(buf, index)
	case structs.AllocStopRequestType:
		err = f.applyAllocStop(buf, index)
	case structs.CSIVolumeRegisterRequestType:
		var stored []*structs.CSIVolume
		if stored, err = f.applyCSIVolumeRegister(buf, index); err == nil {
			return stored // the register's answer (CSIVolumeEndpoint.Register)
		}
	case structs.CSIVolumeDeregisterRequestType:
		err = f.applyCSIVolumeDeregister(buf, index)
	case structs.CSIVolumeClaimRequestType:
		err = f.applyCSIVolumeClaim(buf, index)
	case structs.CSIVolumeClaimGroupsRequestType:
		var errs []error
		if errs, err = f.applyCSIVolumeClaimGroups(buf, index); err == nil {
			return errs // one per group
		}
	case structs.CSIPluginDeleteRequestType:
		err = f.applyCSIPluginDelete(buf, index)
	case structs.ACLPolicyUpsertRequestType, structs.ACLPolicyDeleteRequestType,
		structs.ACLTokenUpsertRequestType, structs.ACLTokenDeleteRequestType,
		structs.ACLTokenBootstrapRequestType:
		err = f.applyACL(msgType, buf, index)
	default:
		if ignoreUnknown {
			f.logger.Warn("ignoring unknown raft message type", "type", uint8(msgType), "index", index)
			return nil
		}
		h := &HaltError{Index: index, Type: uint8(msgType)}
		f.haltOnce.Do(func() {
			f.halted.Store(h)
			f.logger.Error("fsm halted", "index", index, "type", uint8(msgType), "error", h)
			close(f.haltCh)
		})
		return h
	}
	if err != nil {
		if structs.CodeOf(err) == structs.CodeInternal {
			f.logger.Error("applying raft entry failed", "type", uint8(msgType), "index", index, "error", err)
		} else {
			f.logger.Debug("raft entry refused", "type", uint8(msgType), "index", index, "error", err)
		}
		return err
	}
	return nil
}

// decodeRequest decodes an entry's body, naming the message type on error.
// An entry whose lists hold a nil element is refused: no writer sends one,
// and the state store's writes take every element as present (FuzzFSMApply
// found a policy upsert of [nil] panicking every server that applied it).
func decodeRequest(buf []byte, out any) error {
	if err := msgpack.Decode(buf, out); err != nil {
		return fmt.Errorf("decoding %T: %w", out, err)
	}
	if field := nilElement(reflect.ValueOf(out)); field != "" {
		return structs.NewError(structs.CodeInvalid, "decoding %T: %s holds a nil entry", out, field)
	}
	return nil
}

// pointerLists caches, per request type, the index paths of its fields
// (embedded structs' included) that are slices of pointers or maps with
// pointer values.
var pointerLists sync.Map // reflect.Type -> [][]int

// nilElement names the first slice-of-pointers or map-of-pointers field
// of the struct *v that holds a nil element, or returns "".
func nilElement(v reflect.Value) string {
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	v = v.Elem()
	paths, ok := pointerLists.Load(v.Type())
	if !ok {
		paths, _ = pointerLists.LoadOrStore(v.Type(), listFields(v.Type(), nil))
	}
	for _, path := range paths.([][]int) {
		f, err := v.FieldByIndexErr(path)
		if err != nil {
			continue // behind a nil embedded pointer: nothing there
		}
		switch f.Kind() {
		case reflect.Slice:
			for i := range f.Len() {
				if f.Index(i).IsNil() {
					return v.Type().FieldByIndex(path).Name
				}
			}
		case reflect.Map:
			for it := f.MapRange(); it.Next(); {
				if it.Value().IsNil() {
					return v.Type().FieldByIndex(path).Name
				}
			}
		}
	}
	return ""
}

func listFields(t reflect.Type, prefix []int) [][]int {
	var out [][]int
	for i := range t.NumField() {
		f := t.Field(i)
		path := append(append([]int(nil), prefix...), i)
		ft := f.Type
		if f.Anonymous {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, listFields(ft, path)...)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map) && ft.Elem().Kind() == reflect.Pointer {
			out = append(out, path)
		}
	}
	return out
}

func (f *FSM) applyNodeRegister(buf []byte, index uint64) error {
	var req structs.NodeRegisterRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().UpsertNode(index, req.Node)
}

func (f *FSM) applyNodeDeregister(buf []byte, index uint64) error {
	var req structs.NodeDeregisterRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().DeleteNode(index, req.NodeIDs)
}

func (f *FSM) applyNodeUpdateStatus(buf []byte, index uint64) error {
	var req structs.NodeUpdateStatusRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().UpdateNodeStatus(index, req.NodeID, req.Status, req.Description, req.Timestamp, req.Evals...)
}

func (f *FSM) applyNodeUpdateDrain(buf []byte, index uint64) error {
	var req structs.NodeUpdateDrainRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().UpdateNodeDrain(index, req.NodeID, req.DrainStrategy, req.MarkEligible, req.Timestamp, req.Evals...)
}

func (f *FSM) applyNodeUpdateEligibility(buf []byte, index uint64) error {
	var req structs.NodeUpdateEligibilityRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().UpdateNodeEligibility(index, req.NodeID, req.Eligibility, req.Timestamp, req.Evals...)
}

func (f *FSM) applyNodeBatchUpdateStatus(buf []byte, index uint64) error {
	var req structs.NodeBatchUpdateStatusRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().BatchUpdateNodeStatus(index, req.Updates, req.Evals...)
}

func (f *FSM) applyJobRegister(buf []byte, index uint64) error {
	var req structs.JobRegisterRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().RegisterJob(index, req.Job, req.TrackedVersions, evalList(req.Eval)...)
}

func (f *FSM) applyJobDeregister(buf []byte, index uint64) error {
	var req structs.JobDeregisterRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	ns := req.RequestNamespace()
	if req.Purge {
		return f.State().DeleteJob(index, ns, req.JobID, evalList(req.Eval)...)
	}
	return f.State().StopJobKeeping(index, ns, req.JobID, req.TrackedVersions, req.Timestamp, evalList(req.Eval)...)
}

func (f *FSM) applyJobStability(buf []byte, index uint64) error {
	var req structs.JobStabilityRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().UpdateJobStability(index, req.RequestNamespace(), req.JobID, req.JobVersion, req.Stable)
}

func evalList(e *structs.Evaluation) []*structs.Evaluation {
	if e == nil {
		return nil
	}
	return []*structs.Evaluation{e}
}

func (f *FSM) applyEvalUpdate(buf []byte, index uint64) error {
	var req structs.EvalUpdateRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().UpsertEvals(index, req.Evals)
}

func (f *FSM) applyEvalDelete(buf []byte, index uint64) error {
	var req structs.EvalDeleteRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().DeleteEvals(index, req.EvalIDs)
}

func (f *FSM) applyAllocClientUpdate(buf []byte, index uint64) error {
	var req structs.AllocUpdateRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().UpdateAllocsFromClient(index, req.Alloc, req.Evals...)
}

func (f *FSM) applyPlanResults(buf []byte, index uint64) error {
	req, ok := f.handedOffPlan(buf)
	if !ok {
		req = &structs.ApplyPlanResultsRequest{}
		if err := decodeRequest(buf, req); err != nil {
			return err
		}
	}
	if err := f.State().UpsertPlanResults(index, req); err != nil {
		return err
	}
	for _, a := range req.AllocsUpdated {
		steptrace.Mark(a.ID, steptrace.AllocApplied)
	}
	return nil
}

// handedOffPlan is the plan of entry body buf as the leader's applier
// built it, when this server proposed it (raftApplier.Apply).
func (f *FSM) handedOffPlan(buf []byte) (*structs.ApplyPlanResultsRequest, bool) {
	msg, ok := f.decoded.take(buf)
	if !ok {
		return nil, false
	}
	req, ok := msg.(*structs.ApplyPlanResultsRequest)
	return req, ok
}

func (f *FSM) applyAllocStop(buf []byte, index uint64) error {
	var req structs.AllocStopRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().StopAlloc(index, req.AllocID, structs.AllocDescStoppedByUser, req.Timestamp, req.Eval)
}

func (f *FSM) applyAllocDelete(buf []byte, index uint64) error {
	var req structs.AllocDeleteRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().DeleteAllocs(index, req.AllocIDs)
}

// applyCSIVolumeRegister stores the entry's volumes and returns them as
// stored (immutable from now on), so the endpoint answers with what this
// entry wrote instead of reading each volume back.
func (f *FSM) applyCSIVolumeRegister(buf []byte, index uint64) ([]*structs.CSIVolume, error) {
	var vols []*structs.CSIVolume
	if msg, ok := f.decoded.take(buf); ok {
		if req, ok := msg.(*structs.CSIVolumeRegisterRequest); ok {
			vols = req.Volumes
		}
	}
	if vols == nil {
		var req structs.CSIVolumeRegisterRequest
		if err := decodeRequest(buf, &req); err != nil {
			return nil, err
		}
		vols = req.Volumes
	}
	traced := len(vols) > 0 && vols[0] != nil
	if traced {
		steptrace.Mark(vols[0].ID, steptrace.RegisterStoring)
	}
	if err := f.State().UpsertCSIVolumesOwned(index, vols); err != nil {
		return nil, err
	}
	if traced {
		steptrace.Mark(vols[0].ID, steptrace.RegisterApplied)
	}
	return vols, nil
}

func (f *FSM) applyCSIVolumeDeregister(buf []byte, index uint64) error {
	var req structs.CSIVolumeDeregisterRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().DeleteCSIVolumes(index, req.RequestNamespace(), req.VolumeIDs, req.Force)
}

// applyCSIVolumeClaimGroups applies a group commit of claim writes; the
// entry's response is one error per group (nil: applied), and err an
// error of the whole entry.
func (f *FSM) applyCSIVolumeClaimGroups(buf []byte, index uint64) (errs []error, err error) {
	var req structs.CSIVolumeClaimGroupsRequest
	if msg, ok := f.decoded.take(buf); ok && msg != nil {
		if r, ok := msg.(*structs.CSIVolumeClaimGroupsRequest); ok {
			req = *r
		}
	}
	if req.Groups == nil {
		if err := decodeRequest(buf, &req); err != nil {
			return nil, err
		}
	}
	groups := make([][]*structs.CSIVolumeClaimUpdate, len(req.Groups))
	for i, g := range req.Groups {
		groups[i] = g.Claims
	}
	errs, err = f.State().UpdateCSIVolumeClaimGroups(index, groups, req.Timestamp)
	for i, g := range groups {
		if err == nil && i < len(errs) && errs[i] == nil {
			markTaken(g)
		}
	}
	return errs, err
}

func (f *FSM) applyCSIVolumeClaim(buf []byte, index uint64) error {
	var req structs.CSIVolumeClaimBatchRequest
	if msg, ok := f.decoded.take(buf); ok && msg != nil {
		if r, ok := msg.(*structs.CSIVolumeClaimBatchRequest); ok {
			req = *r
		}
	}
	if req.Claims == nil {
		if err := decodeRequest(buf, &req); err != nil {
			return err
		}
	}
	if err := f.State().UpdateCSIVolumeClaims(index, req.Claims, req.Timestamp); err != nil {
		return err
	}
	markTaken(req.Claims)
	return nil
}

// markTaken marks the claims a write made Taken (helper/steptrace).
func markTaken(claims []*structs.CSIVolumeClaimUpdate) {
	for _, u := range claims {
		if u != nil && u.Claim != nil && u.Claim.Step == structs.CSIClaimTaken {
			steptrace.Mark(u.Claim.AllocID, steptrace.ClaimApplied)
		}
	}
}

func (f *FSM) applyCSIPluginDelete(buf []byte, index uint64) error {
	var req structs.CSIPluginDeleteRequest
	if err := decodeRequest(buf, &req); err != nil {
		return err
	}
	return f.State().DeleteCSIPlugin(index, req.ID)
}

// Snapshot format. A snapshot is a msgpack stream: an fsmSnapshotHeader,
// then records of (record type, object), then the end record. Record
// types are msgpack positive fixints, so each record is literally one type
// byte followed by the msgpack object. Values are persisted: never
// renumber, only append.
type fsmSnapshotRecord uint8

const (
	fsmSnapEnd       fsmSnapshotRecord = 0
	fsmSnapIndex     fsmSnapshotRecord = 1
	fsmSnapNode      fsmSnapshotRecord = 2
	fsmSnapJob       fsmSnapshotRecord = 3
	fsmSnapAlloc     fsmSnapshotRecord = 4
	fsmSnapEval      fsmSnapshotRecord = 5
	fsmSnapCSIVolume fsmSnapshotRecord = 6
	fsmSnapCSIPlugin fsmSnapshotRecord = 7
	fsmSnapACLPolicy fsmSnapshotRecord = 8
	fsmSnapACLToken  fsmSnapshotRecord = 9
	// Kept versions of jobs (the version in force included).
	fsmSnapJobVersion fsmSnapshotRecord = 10
	// One node's instances of one CSI plugin. Snapshots written before
	// they had their own table carry them in the plugin record instead;
	// the restore moves them (state.StateRestore.CSIPluginRestore).
	fsmSnapCSIPluginInstance fsmSnapshotRecord = 11
)

// fsmSnapshotVersion is the snapshot format this server writes and reads.
const fsmSnapshotVersion = 1

type fsmSnapshotHeader struct {
	Version int
	// LastIndex is the store's latest index when the snapshot was taken,
	// for operators reading a snapshot; Raft keeps its own.
	LastIndex uint64
}

// fsmSnapshot is a point-in-time view of the store being persisted.
type fsmSnapshot struct {
	snap *state.StateSnapshot
}

// Snapshot captures the current state; Persist writes it out later,
// concurrently with Apply.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	snap, err := f.State().Snapshot()
	if err != nil {
		return nil, fmt.Errorf("fsm snapshot: %w", err)
	}
	return &fsmSnapshot{snap: snap}, nil
}

// Persist streams every table to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.persist(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persisting fsm snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) persist(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := codec.NewEncoder(bw, msgpack.Handle())
	last, err := s.snap.LatestIndex()
	if err != nil {
		return err
	}
	if err := enc.Encode(&fsmSnapshotHeader{Version: fsmSnapshotVersion, LastIndex: last}); err != nil {
		return fmt.Errorf("writing header: %w", err)
	}
	tables := []struct {
		record fsmSnapshotRecord
		name   string
		iter   func() (memdb.ResultIterator, error)
	}{
		{fsmSnapIndex, state.TableIndex, s.snap.Indexes},
		{fsmSnapNode, state.TableNodes, func() (memdb.ResultIterator, error) { return s.snap.Nodes(nil) }},
		{fsmSnapJob, state.TableJobs, func() (memdb.ResultIterator, error) { return s.snap.Jobs(nil, structs.AllNamespaces) }},
		{fsmSnapAlloc, state.TableAllocs, func() (memdb.ResultIterator, error) { return s.snap.Allocs(nil) }},
		{fsmSnapEval, state.TableEvals, func() (memdb.ResultIterator, error) { return s.snap.Evals(nil, structs.AllNamespaces) }},
		{fsmSnapCSIVolume, state.TableCSIVolumes, func() (memdb.ResultIterator, error) {
			return s.snap.CSIVolumes(nil, structs.AllNamespaces)
		}},
		{fsmSnapCSIPlugin, state.TableCSIPlugins, func() (memdb.ResultIterator, error) { return s.snap.CSIPlugins(nil) }},
		{fsmSnapCSIPluginInstance, state.TableCSIPluginInstances, func() (memdb.ResultIterator, error) {
			return s.snap.AllCSIPluginInstances(nil)
		}},
		{fsmSnapACLPolicy, state.TableACLPolicies, func() (memdb.ResultIterator, error) { return s.snap.ACLPolicies(nil, "") }},
		{fsmSnapACLToken, state.TableACLTokens, func() (memdb.ResultIterator, error) { return s.snap.ACLTokens(nil, "") }},
		{fsmSnapJobVersion, state.TableJobVersions, func() (memdb.ResultIterator, error) { return s.snap.JobVersions(nil) }},
	}
	for _, t := range tables {
		iter, err := t.iter()
		if err != nil {
			return err
		}
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			if err := enc.Encode(t.record); err != nil {
				return fmt.Errorf("writing %s: %w", t.name, err)
			}
			if err := enc.Encode(raw); err != nil {
				return fmt.Errorf("writing %s: %w", t.name, err)
			}
		}
	}
	if err := enc.Encode(fsmSnapEnd); err != nil {
		return fmt.Errorf("writing end of snapshot: %w", err)
	}
	return bw.Flush()
}

// Release is a no-op: the view needs no cleanup.
func (s *fsmSnapshot) Release() {}

// Restore replaces the state with a snapshot's: it reads every record into
// a new store, commits, swaps the new store in, and abandons the old one
// so blocking queries on it wake up and re-read.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	store, err := state.NewStateStore(f.logger)
	if err != nil {
		return fmt.Errorf("restoring fsm snapshot: %w", err)
	}
	restore, err := store.Restore()
	if err != nil {
		return fmt.Errorf("restoring fsm snapshot: %w", err)
	}
	defer restore.Abort()
	if err := readFSMSnapshot(bufio.NewReader(rc), restore); err != nil {
		return fmt.Errorf("restoring fsm snapshot: %w", err)
	}
	if err := restore.Commit(); err != nil {
		return fmt.Errorf("restoring fsm snapshot: %w", err)
	}
	f.hookEvents(store)
	if b := f.events.Load(); b != nil {
		b.Reset()
	}
	old := f.state.Swap(store)
	old.SetCommitHook(nil)
	old.Abandon()
	return nil
}

func readFSMSnapshot(r io.Reader, restore *state.StateRestore) error {
	dec := codec.NewDecoder(r, msgpack.Handle())
	var header fsmSnapshotHeader
	if err := dec.Decode(&header); err != nil {
		return fmt.Errorf("reading header: %w", err)
	}
	if header.Version != fsmSnapshotVersion {
		return fmt.Errorf("snapshot format version %d is not supported (want %d)", header.Version, fsmSnapshotVersion)
	}
	for {
		var record fsmSnapshotRecord
		if err := dec.Decode(&record); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errors.New("snapshot is truncated: no end record")
			}
			return fmt.Errorf("reading record type: %w", err)
		}
		var err error
		switch record {
		case fsmSnapEnd:
			return nil
		case fsmSnapIndex:
			err = decodeRecord(dec, restore.IndexRestore)
		case fsmSnapNode:
			err = decodeRecord(dec, restore.NodeRestore)
		case fsmSnapJob:
			err = decodeRecord(dec, restore.JobRestore)
		case fsmSnapAlloc:
			err = decodeRecord(dec, restore.AllocRestore)
		case fsmSnapEval:
			err = decodeRecord(dec, restore.EvalRestore)
		case fsmSnapCSIVolume:
			err = decodeRecord(dec, restore.CSIVolumeRestore)
		case fsmSnapCSIPlugin:
			err = decodeRecord(dec, restore.CSIPluginRestore)
		case fsmSnapACLPolicy:
			err = decodeRecord(dec, restore.ACLPolicyRestore)
		case fsmSnapACLToken:
			err = decodeRecord(dec, restore.ACLTokenRestore)
		case fsmSnapJobVersion:
			err = decodeRecord(dec, restore.JobVersionRestore)
		case fsmSnapCSIPluginInstance:
			err = decodeRecord(dec, restore.CSIPluginInstanceRestore)
		default:
			return fmt.Errorf("unknown snapshot record type %d (written by a newer server?)", record)
		}
		if err != nil {
			return err
		}
	}
}

// decodeRecord decodes one object of type T and hands it to restore.
func decodeRecord[T any](dec *codec.Decoder, restore func(*T) error) error {
	obj := new(T)
	if err := dec.Decode(obj); err != nil {
		return fmt.Errorf("decoding %T: %w", obj, err)
	}
	return restore(obj)
}
