// Package raftlog opens the servers' Raft log: hashicorp/raft-wal, with a
// repair on open for a bug of raft-wal v0.4.0 (hashicorp/raft-wal#31, the
// newest version available to Berth).
//
// The bug: when Raft deletes a log suffix that starts inside the tail
// segment (a follower dropping entries a new leader does not have, raft's
// "clearing log suffix"), raft-wal records that segment as sealed in its
// meta store but never writes the segment's index block. The running
// process still reads it through the writer's in-memory index; a
// reopened WAL has only the missing on-disk index, every read in that
// segment fails with "sealed segment has no index block", and
// raft.NewRaft panics on it: the server crash-loops, with its log intact.
//
// The repair: before raft-wal opens the directory, every sealed segment
// without an index is sealed the way raft-wal seals a full one. The
// segment file is recovered as a tail (its frames are scanned, which
// rebuilds the offsets of every entry in it), one filler entry is
// appended past the last entry in the file with a size limit that makes
// that append write the index block, and the meta store records where the
// index starts. The filler and any entries Raft had truncated stay in the
// file beyond the segment's MaxIndex, where readers never look. Nothing
// the meta store says the segment holds is moved or rewritten, so the
// repair cannot lose an entry Raft kept; a segment whose file holds fewer
// entries than its meta store says is refused with an error, never
// opened short.
//
// It is idempotent and crash-safe: the meta store is committed only after
// the index is on disk, and an index block found by a later open is
// checked against the offsets the scan rebuilt; one torn by a crash
// (raft-wal's recovery takes any index frame for a finished seal) is cut
// off and written again.
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// frameHeaderLen is the size of a raft-wal segment frame's header: an
// index block's array starts this far after its frame (segment/format.go).
const frameHeaderLen = 8

// Store is an open Raft log (raft.LogStore and raft.StableStore).
type Store struct {
	WAL *raftwal.WAL
	// Repaired counts the segments sealed on open.
	Repaired int

	// meta is owned here because WAL.Close does not close it: its bbolt
	// file lock would outlive the server and a restart in the same
	// process would wait on it forever.
	meta *metadb.BoltMetaDB
}

// Open repairs, then opens, the raft-wal directory dir.
func Open(dir string, logger hclog.Logger) (*Store, error) {
	meta := &metadb.BoltMetaDB{}
	ps, err := meta.Load(dir)
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("raftlog: loading the meta store in %s: %w", dir, err)
	}
	repaired := 0
	for i, seg := range ps.Segments {
		if seg.SealTime.IsZero() || seg.IndexStart != 0 {
			continue
		}
		start, err := seal(dir, seg)
		if err != nil {
			meta.Close()
			return nil, err
		}
		ps.Segments[i].IndexStart = start
		repaired++
		logger.Warn("sealed a raft log segment that a suffix truncation left without an index (hashicorp/raft-wal#31)",
			"segment", segment.FileName(seg), "min_index", seg.MinIndex, "max_index", seg.MaxIndex)
	}
	if repaired > 0 {
		if err := meta.CommitState(ps); err != nil {
			meta.Close()
			return nil, fmt.Errorf("raftlog: recording the repaired segments in %s: %w", dir, err)
		}
	}
	wal, err := raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithLogger(logger))
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("raftlog: opening %s: %w", dir, err)
	}
	return &Store{WAL: wal, Repaired: repaired, meta: meta}, nil
}

// Close closes the log and its meta store.
func (s *Store) Close() error {
	return errors.Join(s.WAL.Close(), s.meta.Close())
}

// segmentFile is the file name of seg in its directory.
func segmentFile(seg types.SegmentInfo) string { return segment.FileName(seg) }

// offsetter is the part of raft-wal's segment writer that answers where
// an entry's frame starts, from the offsets its recovery scan rebuilt.
type offsetter interface {
	OffsetForFrame(idx uint64) (uint32, error)
}

// seal writes the index block of the sealed segment seg, or finds a whole
// one a previous repair wrote, and returns where its array starts.
func seal(dir string, seg types.SegmentInfo) (uint64, error) {
	name := segmentFile(seg)
	for attempt := 0; ; attempt++ {
		start, torn, err := sealOnce(dir, seg)
		if err != nil {
			return 0, fmt.Errorf("raftlog: sealing raft log segment %s in %s: %w", name, dir, err)
		}
		if !torn {
			return start, nil
		}
		if attempt > 0 {
			return 0, fmt.Errorf("raftlog: sealing raft log segment %s in %s: its index block does not match its entries after a rewrite", name, dir)
		}
		// Cut the torn index frame off; the filler before it has no
		// commit frame after it, so recovery drops it as unwritten.
		if err := os.Truncate(filepath.Join(dir, name), int64(start-frameHeaderLen)); err != nil {
			return 0, fmt.Errorf("raftlog: cutting a torn index block off raft log segment %s: %w", name, err)
		}
	}
}

// sealOnce recovers seg as a tail and seals it unless it is sealed
// already, then checks the index against the scanned offsets. torn
// reports an index block that does not match them.
func sealOnce(dir string, seg types.SegmentInfo) (start uint64, torn bool, err error) {
	info := seg
	// The next append seals the segment whatever its size.
	info.SizeLimit = 1
	sw, err := segment.NewFiler(dir, fs.New()).RecoverTail(info)
	if err != nil {
		return 0, false, fmt.Errorf("recovering it: %w", err)
	}
	defer sw.Close()
	last := sw.LastIndex()
	if last < seg.MaxIndex {
		return 0, false, fmt.Errorf("the file holds entries up to %d but the meta store says %d..%d: entries are missing, so this server's Raft data cannot be trusted; remove the server's data_dir raft directory and let it rejoin from the leader's snapshot",
			last, seg.MinIndex, seg.MaxIndex)
	}
	sealed, start, err := sw.Sealed()
	if err != nil {
		return 0, false, err
	}
	if !sealed {
		// The filler: past every entry in the file, so past MaxIndex.
		if err := sw.Append([]types.LogEntry{{Index: last + 1, Data: []byte{}}}); err != nil {
			return 0, false, fmt.Errorf("writing its index block: %w", err)
		}
		if sealed, start, err = sw.Sealed(); err != nil || !sealed {
			return 0, false, fmt.Errorf("writing its index block: the segment did not seal (%v)", err)
		}
	}
	of, ok := sw.(offsetter)
	if !ok {
		return 0, false, fmt.Errorf("raft-wal's segment writer %T no longer reports frame offsets", sw)
	}
	match, err := indexMatches(filepath.Join(dir, segmentFile(seg)), seg, start, of)
	if err != nil {
		return 0, false, err
	}
	return start, !match, nil
}

// indexMatches reports whether the index array at start in the file holds
// the scanned offsets of every entry MinIndex..MaxIndex.
func indexMatches(path string, seg types.SegmentInfo, start uint64, of offsetter) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	n := seg.MaxIndex - seg.BaseIndex + 1
	buf := make([]byte, 4*n)
	if _, err := f.ReadAt(buf, int64(start)); err != nil {
		// A short file is a torn index.
		return false, nil
	}
	for idx := seg.MinIndex; idx <= seg.MaxIndex; idx++ {
		want, err := of.OffsetForFrame(idx)
		if err != nil {
			return false, fmt.Errorf("entry %d: %w", idx, err)
		}
		if got := binary.LittleEndian.Uint32(buf[4*(idx-seg.BaseIndex):]); got != want {
			return false, nil
		}
	}
	return true, nil
}
