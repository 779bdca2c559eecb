package lsn

import (
	"errors"
	"fmt"
)

// ErrLayout is wrapped by errors about an impossible WAL layout.
var ErrLayout = errors.New("lsn: invalid WAL layout")

// Page header sizes on 64-bit builds (MAXALIGN 8): SizeOfXLogShortPHD is
// MAXALIGN(sizeof(XLogPageHeaderData)) = 24 and SizeOfXLogLongPHD, written on the first page
// of every segment, is 40 (src/include/access/xlog_internal.h; unchanged in 14 to 18).
const (
	ShortPageHeader = 24
	LongPageHeader  = 40
)

// WALLayout is a server's WAL geometry: wal_block_size and wal_segment_size in bytes. Both are
// fixed when the cluster is initialised; read them once per monitor connection.
type WALLayout struct {
	BlockSize   uint64
	SegmentSize uint64
}

// DefaultWAL is the layout of a default build and initdb: 8 kB pages, 16 MB segments.
var DefaultWAL = WALLayout{BlockSize: 8192, SegmentSize: 16 << 20}

// Validate checks that both sizes are powers of two and that a segment holds whole pages.
func (w WALLayout) Validate() error {
	pow2 := func(v uint64) bool { return v != 0 && v&(v-1) == 0 }
	if !pow2(w.BlockSize) || !pow2(w.SegmentSize) || w.SegmentSize < w.BlockSize || w.BlockSize <= LongPageHeader {
		return fmt.Errorf("%w: block %d bytes, segment %d bytes (both must be powers of two, the segment at least one block; check wal_block_size and wal_segment_size)", ErrLayout, w.BlockSize, w.SegmentSize)
	}
	return nil
}

// InsertProgress turns a primary's pg_current_wal_insert_lsn() into the progress a standby's
// pg_last_wal_replay_lsn() can reach.
//
// When the insert position sits exactly at a page boundary the server reports it past the
// page header that the next record will need (boundary+24, or boundary+40 at a segment start),
// while a standby that replayed everything reports the end of the last record: the boundary
// itself. Without this correction a causal read against an idle primary (for example right
// after pg_switch_wal) would wait for a position no standby ever reports. Nothing is stored
// between the boundary and the header's end, so lowering the requirement to the boundary
// loses no commit. Any other position is returned unchanged. w must be valid.
func (w WALLayout) InsertProgress(l LSN) LSN {
	v := uint64(l)
	if v%w.SegmentSize == LongPageHeader {
		return l - LongPageHeader
	}
	if v%w.BlockSize == ShortPageHeader && v%w.SegmentSize != ShortPageHeader {
		return l - ShortPageHeader
	}
	return l
}
