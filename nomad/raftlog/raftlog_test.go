package raftlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/shoenig/test/must"
)

// entries returns raft logs first..last whose data names their index.
func entries(first, last uint64, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := first; i <= last; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry %d term %d", i, term)})
	}
	return out
}

// rawOpen opens the WAL in dir the way raft-wal alone does, no repair.
func rawOpen(t *testing.T, dir string) (*raftwal.WAL, func()) {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta))
	must.NoError(t, err)
	return w, func() { must.NoError(t, w.Close()); must.NoError(t, meta.Close()) }
}

// openStore opens dir through this package.
func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, hclog.NewNullLogger())
	must.NoError(t, err)
	return s
}

// truncateInsideTheTail is the sequence Raft runs on a follower whose log
// has a suffix the new leader does not (raft's "clearing log suffix"): a
// suffix DeleteRange whose start lies inside the unsealed tail segment.
// raft-wal v0.4.0 marks that segment sealed in its meta store without
// writing the segment's index block.
func truncateInsideTheTail(t *testing.T, dir string) {
	w, closeRaw := rawOpen(t, dir)
	must.NoError(t, w.StoreLogs(entries(1, 10, 1)))
	must.NoError(t, w.DeleteRange(8, 10))
	// Raft then appends the new leader's entries after the kept prefix.
	must.NoError(t, w.StoreLogs(entries(8, 12, 2)))
	closeRaw()
}

// checkLog asserts the log holds exactly first..last with the wanted data.
func checkLog(t *testing.T, ls raft.LogStore, first, last uint64, want map[uint64]string) {
	t.Helper()
	fi, err := ls.FirstIndex()
	must.NoError(t, err)
	li, err := ls.LastIndex()
	must.NoError(t, err)
	must.Eq(t, first, fi)
	must.Eq(t, last, li)
	for i := first; i <= last; i++ {
		var l raft.Log
		must.NoError(t, ls.GetLog(i, &l), must.Sprintf("index %d", i))
		must.Eq(t, want[i], string(l.Data), must.Sprintf("index %d", i))
	}
}

func wantData(spans ...[]*raft.Log) map[uint64]string {
	m := map[uint64]string{}
	for _, s := range spans {
		for _, l := range s {
			m[l.Index] = string(l.Data)
		}
	}
	return m
}

// TestRawWAL_SuffixTruncateBreaksReopen shows the raft-wal bug
// (hashicorp/raft-wal#31) this package exists for: after a suffix
// truncation inside the tail, a reopened WAL cannot read the entries it
// kept, and raft.NewRaft panics on that error ("sealed segment has no
// index block"). If a raft-wal upgrade fixes it, this test fails and the
// repair can go.
func TestRawWAL_SuffixTruncateBreaksReopen(t *testing.T) {
	dir := t.TempDir()
	truncateInsideTheTail(t, dir)

	w, closeRaw := rawOpen(t, dir)
	defer closeRaw()
	var l raft.Log
	err := w.GetLog(5, &l)
	must.ErrorContains(t, err, "sealed segment has no index block")
}

// TestOpen_RepairsATruncatedTail: the same sequence, reopened through
// Open, keeps every entry Raft kept (1..7 of term 1, 8..12 of term 2),
// appends after them, and reopens again (raw too) with nothing lost.
func TestOpen_RepairsATruncatedTail(t *testing.T) {
	dir := t.TempDir()
	truncateInsideTheTail(t, dir)
	want := wantData(entries(1, 7, 1), entries(8, 12, 2))

	s := openStore(t, dir)
	must.Eq(t, 1, s.Repaired)
	checkLog(t, s.WAL, 1, 12, want)
	must.NoError(t, s.WAL.StoreLogs(entries(13, 15, 2)))
	must.NoError(t, s.Close())
	want = wantData(entries(1, 7, 1), entries(8, 15, 2))

	// The repair is on disk: raft-wal alone now reads it, and a second
	// Open has nothing to repair.
	w, closeRaw := rawOpen(t, dir)
	checkLog(t, w, 1, 15, want)
	closeRaw()
	s = openStore(t, dir)
	must.Eq(t, 0, s.Repaired)
	checkLog(t, s.WAL, 1, 15, want)
	must.NoError(t, s.Close())
}

// TestOpen_RepairsEverySegmentTruncatedThatWay: several truncations,
// each inside the tail of its time, leave several sealed segments without
// an index; all are repaired, and a head truncation (a snapshot's
// compaction) afterwards works as usual.
func TestOpen_RepairsEverySegmentTruncatedThatWay(t *testing.T) {
	dir := t.TempDir()
	w, closeRaw := rawOpen(t, dir)
	must.NoError(t, w.StoreLogs(entries(1, 5, 1)))
	must.NoError(t, w.DeleteRange(4, 5))
	must.NoError(t, w.StoreLogs(entries(4, 9, 2)))
	must.NoError(t, w.DeleteRange(9, 9))
	must.NoError(t, w.StoreLogs(entries(9, 20, 3)))
	must.NoError(t, w.DeleteRange(15, 20))
	closeRaw()
	want := wantData(entries(1, 3, 1), entries(4, 8, 2), entries(9, 14, 3))

	s := openStore(t, dir)
	must.Eq(t, 3, s.Repaired)
	checkLog(t, s.WAL, 1, 14, want)
	must.NoError(t, s.WAL.DeleteRange(1, 5))
	must.NoError(t, s.Close())

	s = openStore(t, dir)
	must.Eq(t, 0, s.Repaired)
	checkLog(t, s.WAL, 6, 14, want)
	must.NoError(t, s.Close())
}

// TestOpen_RepairAfterACrashMidSeal: a crash while the repair wrote its
// index block (written, its commit frame not) leaves a torn seal that
// raft-wal's recovery would take for a whole one; Open cuts it off and
// seals again.
func TestOpen_RepairAfterACrashMidSeal(t *testing.T) {
	dir := t.TempDir()
	truncateInsideTheTail(t, dir)
	want := wantData(entries(1, 7, 1), entries(8, 12, 2))

	// Do the repair's seal without committing the meta store, then tear
	// the seal: keep the index frame's header, lose its body and the
	// commit frame after it.
	meta := &metadb.BoltMetaDB{}
	ps, err := meta.Load(dir)
	must.NoError(t, err)
	must.NoError(t, meta.Close())
	seg := ps.Segments[0]
	must.Eq(t, 0, seg.IndexStart)
	indexStart, err := seal(dir, seg)
	must.NoError(t, err)
	path := filepath.Join(dir, segmentFile(seg))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must.NoError(t, err)
	zeros := make([]byte, 256)
	_, err = f.WriteAt(zeros, int64(indexStart))
	must.NoError(t, err)
	must.NoError(t, f.Close())

	s := openStore(t, dir)
	must.Eq(t, 1, s.Repaired)
	checkLog(t, s.WAL, 1, 12, want)
	must.NoError(t, s.Close())
}

// TestOpen_RefusesASegmentShorterThanItsMeta: a sealed segment whose file
// lost entries the meta store says it holds is an error naming the file,
// not a silent loss.
func TestOpen_RefusesASegmentShorterThanItsMeta(t *testing.T) {
	dir := t.TempDir()
	truncateInsideTheTail(t, dir)
	meta := &metadb.BoltMetaDB{}
	ps, err := meta.Load(dir)
	must.NoError(t, err)
	must.NoError(t, meta.Close())
	seg := ps.Segments[0]
	// Cut the file right after its header: no entries left.
	must.NoError(t, os.Truncate(filepath.Join(dir, segmentFile(seg)), 32))

	_, err = Open(dir, hclog.NewNullLogger())
	must.Error(t, err)
	must.True(t, strings.Contains(err.Error(), segmentFile(seg)), must.Sprintf("%v", err))
}
