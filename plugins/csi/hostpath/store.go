package hostpath

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// File names under the root directory.
const (
	lockFileName       = ".lock"
	checkpointFileName = "state.json"
	journalFileName    = "state.journal"
)

// compactAfter is the number of journal entries after which the journal is
// folded into a new checkpoint.
const compactAfter = 1024

// store keeps the State on disk under the root directory, shared by every
// plugin process that uses that root.
//
// Format: a checkpoint (state.json, replaced atomically: temp file, fsync,
// rename, fsync of the directory) plus a journal (state.journal) of the
// changes since, one JSON line per changed object, appended with one write(2).
// A process reads the journal from where it stopped last time, so a call
// costs a stat and, when another process wrote, a short read. Compaction
// writes a new checkpoint and then replaces the journal by an empty file;
// other processes notice the new journal by its inode (their open descriptor
// pins the old inode, so the number cannot be reused under them).
//
// Locking: every read and write runs under flock(2) on <root>/.lock (between
// processes) and a one-slot semaphore (between goroutines of this process).
// The lock is held for the whole RPC, mounts included, so that "check for a
// conflict, mount, record" is atomic across all plugins sharing the root.
//
// Durability: changes made by controller RPCs (volumes, snapshots,
// attachments) are fdatasync'ed before the RPC returns. Changes made by node
// RPCs (stages, publishes) are not: they describe bind mounts, which do not
// survive a machine crash either, while a crash of the process itself loses
// nothing that write(2) has returned. This keeps NodePublishVolume within a
// few microseconds of the mount itself.
//
// A line cut short by a crash (no newline, or not valid JSON) ends the
// journal; the next writer truncates it away.
type store struct {
	dir string
	log hclog.Logger

	// sem is a one-slot semaphore serialising this process's goroutines; the
	// flock on lock serialises processes. Both guard every field below.
	sem        chan struct{}
	lock       *os.File
	journal    *os.File
	journalIno uint64
	offset     int64 // journal bytes applied to st
	torn       bool  // bytes after offset are a torn or corrupt tail
	entries    int   // journal entries since the checkpoint
	st         *State
}

// entry is one journal line: the new value of one object, or its deletion
// when the object is nil.
type entry struct {
	Seq      uint64    `json:"seq"`
	Kind     string    `json:"kind"`
	ID       string    `json:"id"`
	Volume   *Volume   `json:"volume,omitempty"`
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	Node     *Node     `json:"node,omitempty"`
}

// Kinds of journal entries.
const (
	kindVolume   = "volume"
	kindSnapshot = "snapshot"
	kindNode     = "node"
)

// openStore opens (creating if needed) the store in dir and loads the state.
func openStore(ctx context.Context, dir string, log hclog.Logger) (*store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	s := &store{dir: dir, log: log, sem: make(chan struct{}, 1), lock: lock}
	if err := s.read(ctx, func(*State) error { return nil }); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

// close releases the files. The store must not be used afterwards; closing
// it again does nothing.
func (s *store) close() error {
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	if s.lock == nil {
		return nil
	}
	var errs []error
	if s.journal != nil {
		errs = append(errs, s.journal.Close())
		s.journal = nil
	}
	errs = append(errs, s.lock.Close())
	s.lock = nil
	return errors.Join(errs...)
}

// acquire takes both locks and brings st up to date.
func (s *store) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for state lock: %w", ctx.Err())
	}
	if err := flockExclusive(ctx, s.lock); err != nil {
		<-s.sem
		return nil, err
	}
	release = func() {
		if err := funlock(s.lock); err != nil {
			s.log.Error("releasing state lock", "error", err)
		}
		<-s.sem
	}
	if err := s.refresh(); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// read calls fn with the current state. fn must neither modify nor retain it.
func (s *store) read(ctx context.Context, fn func(st *State) error) error {
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return fn(s.st)
}

// update calls fn with a transaction on the current state and, if fn returns
// nil, writes its changes to the journal (fdatasync'ed when durable). The
// locks are held while fn runs.
func (s *store) update(ctx context.Context, durable bool, fn func(tx *txn) error) error {
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	tx := &txn{State: s.st.shallowCopy(), changed: map[txnKey]struct{}{}}
	if err := fn(tx); err != nil {
		return err
	}
	return s.commit(tx, durable)
}

func (s *store) journalPath() string    { return filepath.Join(s.dir, journalFileName) }
func (s *store) checkpointPath() string { return filepath.Join(s.dir, checkpointFileName) }

// refresh makes st reflect everything other processes wrote.
func (s *store) refresh() error {
	var fi unix.Stat_t
	err := unix.Stat(s.journalPath(), &fi)
	switch {
	case errors.Is(err, unix.ENOENT):
		return s.reload()
	case err != nil:
		return fmt.Errorf("checking state journal: %w", err)
	case s.journal == nil || fi.Ino != s.journalIno:
		return s.reload()
	}
	// Same file as ours, so the path's size is our file's size.
	return s.readJournal(fi.Size)
}

// reload reads the checkpoint and the whole journal.
func (s *store) reload() error {
	st := newState()
	data, err := os.ReadFile(s.checkpointPath())
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading state checkpoint: %w", err)
	default:
		if err := json.Unmarshal(data, st); err != nil {
			return fmt.Errorf("decoding state checkpoint %s: %w", s.checkpointPath(), err)
		}
		st.ensureMaps()
	}
	if s.journal != nil {
		s.journal.Close()
		s.journal = nil
	}
	j, err := os.OpenFile(s.journalPath(), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("opening state journal: %w", err)
	}
	fi, err := j.Stat()
	if err != nil {
		j.Close()
		return fmt.Errorf("checking state journal: %w", err)
	}
	s.journal, s.journalIno = j, fi.Sys().(*syscall.Stat_t).Ino
	s.st, s.offset, s.torn, s.entries = st, 0, false, 0
	return s.readJournal(fi.Size())
}

// readJournal applies the journal lines written since offset; size is the
// journal's current size.
func (s *store) readJournal(size int64) error {
	if size < s.offset {
		// Only a compaction shrinks the journal, and it replaces the file,
		// so this is someone truncating it by hand: start over.
		s.log.Warn("state journal shrank; reloading", "path", s.journalPath())
		s.journal.Close()
		s.journal = nil
		return s.reload()
	}
	if size == s.offset {
		return nil
	}
	buf := make([]byte, size-s.offset)
	if _, err := s.journal.ReadAt(buf, s.offset); err != nil {
		return fmt.Errorf("reading state journal: %w", err)
	}
	s.torn = false
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			s.torn = true
			break
		}
		var e entry
		if err := json.Unmarshal(buf[:i], &e); err != nil {
			s.log.Warn("ignoring corrupt end of state journal", "path", s.journalPath(), "offset", s.offset, "error", err)
			s.torn = true
			break
		}
		s.apply(s.st, e)
		s.offset += int64(i + 1)
		buf = buf[i+1:]
	}
	return nil
}

// apply applies one journal entry to st, in place.
func (s *store) apply(st *State, e entry) {
	if e.Seq <= st.Seq {
		return // already in the checkpoint
	}
	switch e.Kind {
	case kindVolume:
		if e.Volume == nil {
			delete(st.Volumes, e.ID)
		} else {
			st.Volumes[e.ID] = e.Volume
		}
	case kindSnapshot:
		if e.Snapshot == nil {
			delete(st.Snapshots, e.ID)
		} else {
			st.Snapshots[e.ID] = e.Snapshot
		}
	case kindNode:
		if e.Node == nil {
			delete(st.Nodes, e.ID)
		} else {
			st.Nodes[e.ID] = e.Node
		}
	default:
		s.log.Warn("ignoring state journal entry of unknown kind", "kind", e.Kind, "seq", e.Seq)
	}
	st.Seq = e.Seq
	s.entries++
}

// commit appends the transaction's changes to the journal and installs the
// new state.
func (s *store) commit(tx *txn, durable bool) error {
	if len(tx.changed) == 0 {
		return nil
	}
	if s.torn {
		if err := s.journal.Truncate(s.offset); err != nil {
			return fmt.Errorf("truncating torn state journal: %w", err)
		}
		s.torn = false
	}
	keys := make([]txnKey, 0, len(tx.changed))
	for k := range tx.changed {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].kind != keys[j].kind {
			return keys[i].kind < keys[j].kind
		}
		return keys[i].id < keys[j].id
	})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // Encode ends each entry with a newline
	seq := s.st.Seq
	for _, k := range keys {
		seq++
		e := entry{Seq: seq, Kind: k.kind, ID: k.id}
		switch k.kind {
		case kindVolume:
			e.Volume = tx.Volumes[k.id]
		case kindSnapshot:
			e.Snapshot = tx.Snapshots[k.id]
		case kindNode:
			e.Node = tx.Nodes[k.id]
		}
		if err := enc.Encode(&e); err != nil {
			return fmt.Errorf("encoding state change of %s %q: %w", k.kind, k.id, err)
		}
	}
	n, err := s.journal.Write(buf.Bytes())
	if err != nil {
		// Do not leave half a line for the next reader.
		if terr := s.journal.Truncate(s.offset); terr != nil {
			s.torn = true
		}
		return fmt.Errorf("writing state journal: %w", err)
	}
	if durable {
		if err := unix.Fdatasync(int(s.journal.Fd())); err != nil {
			return fmt.Errorf("syncing state journal: %w", err)
		}
	}
	tx.Seq = seq
	s.st = tx.State
	s.offset += int64(n)
	s.entries += len(keys)
	if s.entries >= compactAfter {
		if err := s.compact(); err != nil {
			// The change is committed; compaction is retried after the next one.
			s.log.Warn("compacting state journal", "error", err)
		}
	}
	return nil
}

// compact writes the state as a new checkpoint and starts an empty journal.
// A crash between the two steps is harmless: the old journal's entries all
// have sequence numbers covered by the new checkpoint and are skipped.
func (s *store) compact() error {
	data, err := json.MarshalIndent(s.st, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding state checkpoint: %w", err)
	}
	if err := writeFileAtomic(s.checkpointPath(), data); err != nil {
		return err
	}
	if err := writeFileAtomic(s.journalPath(), nil); err != nil {
		return err
	}
	return s.reload()
}

// writeFileAtomic replaces path with data: temp file, fsync, rename, fsync
// of the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o640)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// txnKey names one changed object.
type txnKey struct{ kind, id string }

// txn is a change in progress. Its State is a shallow copy of the committed
// state: look objects up freely, but copy one before changing it and store
// the copy with a put method. Objects handed to a put method belong to the
// store from then on.
type txn struct {
	*State
	changed map[txnKey]struct{}
}

func (t *txn) putVolume(v *Volume) {
	t.Volumes[v.ID] = v
	t.changed[txnKey{kindVolume, v.ID}] = struct{}{}
}

func (t *txn) deleteVolume(id string) {
	delete(t.Volumes, id)
	t.changed[txnKey{kindVolume, id}] = struct{}{}
}

func (t *txn) putSnapshot(sn *Snapshot) {
	t.Snapshots[sn.ID] = sn
	t.changed[txnKey{kindSnapshot, sn.ID}] = struct{}{}
}

func (t *txn) deleteSnapshot(id string) {
	delete(t.Snapshots, id)
	t.changed[txnKey{kindSnapshot, id}] = struct{}{}
}

func (t *txn) putNode(n *Node) {
	t.Nodes[n.ID] = n
	t.changed[txnKey{kindNode, n.ID}] = struct{}{}
}
