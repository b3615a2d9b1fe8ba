package state

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
	bolt "go.etcd.io/bbolt"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// withBootID points the boot ID at a file holding id, for the test.
func withBootID(t *testing.T, id string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "boot_id")
	must.NoError(t, os.WriteFile(p, []byte(id+"\n"), 0o600))
	old := bootIDPath
	bootIDPath = p
	t.Cleanup(func() { bootIDPath = old })
}

// fillBoth writes one record of every kind.
func fillBoth(t *testing.T, db DB) {
	t.Helper()
	must.NoError(t, db.PutNodeIdentity(&NodeIdentity{ID: "n1", SecretID: "s1"}))
	must.NoError(t, db.PutAlloc(testAlloc()))
	must.NoError(t, db.PutAllocState("a1", &AllocState{TasksExited: true}))
	must.NoError(t, db.PutTaskState("a1", "t", &structs.TaskState{State: structs.TaskStateRunning}))
	must.NoError(t, db.PutTaskHandle("a1", "t", &drivers.TaskHandle{Version: 1}))
	must.NoError(t, db.PutHookData("a1", "csi", []byte(`{"volumes":{}}`)))
	must.NoError(t, db.Put(BucketCSIUsage, "p/ns/v/rw", []byte(`{"allocs":["a1"]}`)))
	must.NoError(t, db.Put(BucketDynamicPlugins, "csi/p", []byte("x")))
}

// TestBoltDB_ARebootKeepsOnlyTheDurableRecords: a process restart (same
// boot) keeps everything; a restart after a reboot keeps what the servers
// or a fresh start rely on (identity, allocs, TasksExited, plugin
// registry) and nothing of what ended with the boot (task handles and
// states, mount records, staging usage), and the old boot's file is gone.
func TestBoltDB_ARebootKeepsOnlyTheDurableRecords(t *testing.T) {
	withBootID(t, "boot-1")
	path := filepath.Join(t.TempDir(), "client", "state.db")
	db, err := NewBoltDB(path)
	must.NoError(t, err)
	fillBoth(t, db)
	must.NoError(t, db.Close())
	_, err = os.Stat(filepath.Join(filepath.Dir(path), "state-local-boot-1.db"))
	must.NoError(t, err)

	// Same boot: everything is there.
	db, err = NewBoltDB(path)
	must.NoError(t, err)
	h, err := db.GetTaskHandle("a1", "t")
	must.NoError(t, err)
	must.NotNil(t, h)
	hd, err := db.GetHookData("a1", "csi")
	must.NoError(t, err)
	must.NotNil(t, hd)
	must.NoError(t, db.Close())

	withBootID(t, "boot-2")
	db, err = NewBoltDB(path)
	must.NoError(t, err)
	defer db.Close()
	_, err = os.Stat(filepath.Join(filepath.Dir(path), "state-local-boot-1.db"))
	must.True(t, os.IsNotExist(err), must.Sprint("the last boot's node-local file was not removed"))

	id, err := db.GetNodeIdentity()
	must.NoError(t, err)
	must.Eq(t, "n1", id.ID)
	allocs, err := db.GetAllocs()
	must.NoError(t, err)
	must.Len(t, 1, allocs)
	as, err := db.GetAllocState("a1")
	must.NoError(t, err)
	must.True(t, as.TasksExited)
	reg, err := db.Get(BucketDynamicPlugins, "csi/p")
	must.NoError(t, err)
	must.Eq(t, "x", string(reg))

	h, err = db.GetTaskHandle("a1", "t")
	must.NoError(t, err)
	must.Nil(t, h)
	ts, err := db.GetTaskState("a1", "t")
	must.NoError(t, err)
	must.Nil(t, ts)
	hd, err = db.GetHookData("a1", "csi")
	must.NoError(t, err)
	must.Nil(t, hd)
	usage, err := db.List(BucketCSIUsage)
	must.NoError(t, err)
	must.MapEmpty(t, usage)

	// The restored alloc takes node-local writes again.
	must.NoError(t, db.PutHookData("a1", "csi", []byte("y")))
}

// TestBoltDB_ReconcilesACrashBetweenTheTwoFiles: PutAlloc and DeleteAlloc
// write the durable file first; a crash after that write leaves an alloc
// without its local marker, or local records of a deleted alloc. The next
// open repairs both.
func TestBoltDB_ReconcilesACrashBetweenTheTwoFiles(t *testing.T) {
	withBootID(t, "boot-1")
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := NewBoltDB(path)
	must.NoError(t, err)
	s := db.(*store)
	must.NoError(t, db.PutAlloc(testAlloc()))
	// Crash after PutAlloc's durable write: no marker.
	must.NoError(t, s.local.update(func(tx txn) error { return tx.bucket(bucketAllocs).deleteBucket("a1") }))
	// Crash after DeleteAlloc's durable write: local records of "gone".
	must.NoError(t, s.local.update(func(tx txn) error {
		b, err := tx.bucket(bucketAllocs).createBucket("gone")
		if err != nil {
			return err
		}
		if err := b.put(keyAlloc, localMarker); err != nil {
			return err
		}
		hb, err := b.createBucket(bucketHooks)
		if err != nil {
			return err
		}
		return hb.put("csi", []byte("mounted"))
	}))
	must.ErrorIs(t, db.PutHookData("a1", "csi", []byte("x")), ErrUnknownAlloc)
	must.NoError(t, db.Close())

	db, err = NewBoltDB(path)
	must.NoError(t, err)
	defer db.Close()
	must.NoError(t, db.PutHookData("a1", "csi", []byte("x")), must.Sprint("the alloc's marker was not restored"))
	hd, err := db.GetHookData("gone", "csi")
	must.NoError(t, err)
	must.Nil(t, hd, must.Sprint("local records of a deleted alloc survived the reopen"))
	must.ErrorIs(t, db.PutHookData("gone", "csi", []byte("x")), ErrUnknownAlloc)
}

// TestBoltDB_MovesVersion1RecordsToTheLocalFile: a client upgraded in
// place (same boot, tasks running) must find the task handles, mount
// records and staging usage that version 1 kept in state.db; otherwise it
// would start every task a second time.
func TestBoltDB_MovesVersion1RecordsToTheLocalFile(t *testing.T) {
	withBootID(t, "boot-1")
	path := filepath.Join(t.TempDir(), "state.db")
	raw, err := encode(testAlloc())
	must.NoError(t, err)
	handle, err := encode(&drivers.TaskHandle{Version: 1, State: drivers.TaskStateRunning})
	must.NoError(t, err)
	v1, err := bolt.Open(path, 0o600, nil)
	must.NoError(t, err)
	must.NoError(t, v1.Update(func(tx *bolt.Tx) error {
		put := func(path []string, key string, value []byte) {
			b, err := tx.CreateBucketIfNotExists([]byte(path[0]))
			must.NoError(t, err)
			for _, p := range path[1:] {
				b, err = b.CreateBucketIfNotExists([]byte(p))
				must.NoError(t, err)
			}
			must.NoError(t, b.Put([]byte(key), value))
		}
		put([]string{bucketMeta}, keyVersion, []byte(schemaV1))
		put([]string{bucketAllocs, "a1"}, keyAlloc, raw)
		put([]string{bucketAllocs, "a1", bucketTasks, "t"}, keyHandle, handle)
		put([]string{bucketAllocs, "a1", bucketHooks}, "csi", []byte("mounted"))
		put([]string{bucketKV, BucketCSIUsage}, "k", []byte("u"))
		put([]string{bucketKV, BucketDynamicPlugins}, "p", []byte("r"))
		return nil
	}))
	must.NoError(t, v1.Close())

	db, err := NewBoltDB(path)
	must.NoError(t, err)
	h, err := db.GetTaskHandle("a1", "t")
	must.NoError(t, err)
	must.NotNil(t, h, must.Sprint("the task handle of version 1 was lost"))
	must.Eq(t, drivers.TaskStateRunning, h.State)
	hd, err := db.GetHookData("a1", "csi")
	must.NoError(t, err)
	must.Eq(t, "mounted", string(hd))
	u, err := db.Get(BucketCSIUsage, "k")
	must.NoError(t, err)
	must.Eq(t, "u", string(u))
	r, err := db.Get(BucketDynamicPlugins, "p")
	must.NoError(t, err)
	must.Eq(t, "r", string(r))
	s := db.(*store)
	must.NoError(t, s.durable.view(func(tx txn) error {
		must.Eq(t, schemaVersion, string(tx.bucket(bucketMeta).get(keyVersion)))
		must.Nil(t, walk(tx, []string{bucketAllocs, "a1", bucketTasks}), must.Sprint("moved records stayed in state.db"))
		return nil
	}))
	must.NoError(t, db.Close())
}

// TestBoltDB_OnlyTheBootScopedFileSkipsFsync: without a boot ID the local
// file cannot tell a reboot from a restart, so it is synced.
func TestBoltDB_OnlyTheBootScopedFileSkipsFsync(t *testing.T) {
	withBootID(t, "boot-1")
	db, err := NewBoltDB(filepath.Join(t.TempDir(), "state.db"))
	must.NoError(t, err)
	s := db.(*store)
	must.True(t, s.local.(*boltBackend).db.NoSync)
	must.False(t, s.durable.(*boltBackend).db.NoSync)
	must.NoError(t, db.Close())

	bootIDPath = filepath.Join(t.TempDir(), "missing")
	dir := t.TempDir()
	db, err = NewBoltDB(filepath.Join(dir, "state.db"))
	must.NoError(t, err)
	defer db.Close()
	must.False(t, db.(*store).local.(*boltBackend).db.NoSync)
	_, err = os.Stat(filepath.Join(dir, "state-local.db"))
	must.NoError(t, err)
}

// TestBoltDB_AllocWrittenOnlyLocallyIsMadeDurableAtTheNextStart: the
// alloc runner claims once PutAllocLocal returned, while PutAlloc's fsync
// is in flight. A client killed in between must know the alloc (and its
// hook records of what it claimed) when it starts again, and a reboot
// must not bring back one it never made durable. A deleted alloc whose
// durable write never happened must not come back either.
func TestBoltDB_AllocWrittenOnlyLocallyIsMadeDurableAtTheNextStart(t *testing.T) {
	withBootID(t, "boot-1")
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := NewBoltDB(path)
	must.NoError(t, err)
	a := testAlloc()
	must.NoError(t, db.PutAllocLocal(a, nil))
	must.NoError(t, db.PutHookData(a.ID, "csi", []byte("claiming")), must.Sprint("hook records need only the local write"))
	gone := testAlloc()
	gone.ID = "gone"
	must.NoError(t, db.PutAllocLocal(gone, nil))
	must.NoError(t, db.DeleteAlloc(gone.ID))
	allocs, err := db.GetAllocs()
	must.NoError(t, err)
	must.SliceEmpty(t, allocs, must.Sprint("nothing durable yet"))
	must.NoError(t, db.Close()) // the process dies before PutAlloc

	db, err = NewBoltDB(path)
	must.NoError(t, err)
	allocs, err = db.GetAllocs()
	must.NoError(t, err)
	must.SliceLen(t, 1, allocs)
	must.Eq(t, a.ID, allocs[0].ID)
	must.Eq(t, a.JobID, allocs[0].JobID)
	hd, err := db.GetHookData(a.ID, "csi")
	must.NoError(t, err)
	must.Eq(t, []byte("claiming"), hd)
	must.NoError(t, db.Close())

	// Now durable: a reboot keeps the alloc (not its hook records).
	withBootID(t, "boot-2")
	db, err = NewBoltDB(path)
	must.NoError(t, err)
	defer db.Close()
	allocs, err = db.GetAllocs()
	must.NoError(t, err)
	must.SliceLen(t, 1, allocs)
	hd, err = db.GetHookData(a.ID, "csi")
	must.NoError(t, err)
	must.Nil(t, hd)
}

// TestBoltDB_ARebootForgetsAnAllocNeverMadeDurable: the local file of an
// earlier boot is not read, so an alloc only it held is gone, as are the
// mounts and the claims' hook records (the servers' NodeDetach frees those).
func TestBoltDB_ARebootForgetsAnAllocNeverMadeDurable(t *testing.T) {
	withBootID(t, "boot-1")
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := NewBoltDB(path)
	must.NoError(t, err)
	must.NoError(t, db.PutAllocLocal(testAlloc(), nil))
	must.NoError(t, db.Close())
	withBootID(t, "boot-2")
	db, err = NewBoltDB(path)
	must.NoError(t, err)
	defer db.Close()
	allocs, err := db.GetAllocs()
	must.NoError(t, err)
	must.SliceEmpty(t, allocs)
}

// failingUpdates is a backend whose writes fail: the process "dies"
// before them.
type failingUpdates struct{ backend }

func (failingUpdates) update(func(tx txn) error) error { return errors.New("killed") }

// TestBoltDB_DeletingAnAllocNeverMadeDurableDoesNotBringItBack: DeleteAlloc
// turns a whole alloc in the local file into a marker before anything
// else, so a client killed during the delete does not write the alloc to
// state.db at its next start.
func TestBoltDB_DeletingAnAllocNeverMadeDurableDoesNotBringItBack(t *testing.T) {
	withBootID(t, "boot-1")
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := NewBoltDB(path)
	must.NoError(t, err)
	must.NoError(t, db.PutAllocLocal(testAlloc(), nil))
	s := db.(*store)
	durable := s.durable
	s.durable = failingUpdates{durable}
	must.Error(t, db.DeleteAlloc("a1"))
	s.durable = durable
	must.NoError(t, db.Close())

	db, err = NewBoltDB(path)
	must.NoError(t, err)
	defer db.Close()
	allocs, err := db.GetAllocs()
	must.NoError(t, err)
	must.SliceEmpty(t, allocs)
}

// TestBoltDB_AllocLocalCarriesItsTasksFirstStates: PutAllocLocal writes
// the tasks' first states in the alloc's own commit (the alloc runner no
// longer makes one commit per task before its Claim RPC); a restarted
// process reads them back as it would PutTaskState's.
func TestBoltDB_AllocLocalCarriesItsTasksFirstStates(t *testing.T) {
	withBootID(t, "boot-1")
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := NewBoltDB(path)
	must.NoError(t, err)
	a := testAlloc()
	first := map[string]*structs.TaskState{
		"web":  {State: structs.TaskStatePending, Events: []*structs.TaskEvent{{Type: "Received", Time: 7}}},
		"side": {State: structs.TaskStatePending},
	}
	must.NoError(t, db.PutAllocLocal(a, first))
	must.NoError(t, db.Close())

	db, err = NewBoltDB(path)
	must.NoError(t, err)
	defer db.Close()
	for name, want := range first {
		got, err := db.GetTaskState(a.ID, name)
		must.NoError(t, err)
		must.Eq(t, want, got, must.Sprintf("task %q", name))
	}
}
