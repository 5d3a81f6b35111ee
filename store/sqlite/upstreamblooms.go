package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// An upstream request id has no index (store.ByRequestID: vendors make
// them at random, and an index of random values costs the writer a page a
// row). Looking one up used to scan every row of the days asked for: 145
// ms a day of 555,555 rows, some 13 s for the 90 days of a lookup with no
// time range. Instead, every batch SettleBatch writes leaves, for each
// day it wrote rows of, bloom filters of those rows' upstream ids and the
// range of ids the rows got (usage_upstream_blooms; within one write
// transaction a day's new rows take consecutive ids, and no other writer
// runs). The filter of a run is cut in bloomParts by the ids' hash and
// kept part by part, so a lookup reads only its id's part of each run's
// filter (the parts are stored by part, then run: a day's are a few
// pages), and searches the day's table only in the ranges whose filter
// may hold the id, and in the ranges no filter covers: rows of a build
// before the filters, or of a writer that made none, are read as before,
// so a row is never missed for want of a filter.

const (
	// bloomBitsPerID and bloomHashes give about 0.05 % false positives:
	// a false one costs a read of its run's rows (about 1,300 of the
	// day's), so a day's hundreds of runs should give none.
	// The hash, bloomParts and bloomHashes are the stored format's: a
	// filter's size is its own, but filters made otherwise would answer
	// wrongly.
	bloomBitsPerID = 16
	bloomHashes    = 11
	bloomParts     = 16
	// bloomChunkIDs is how many upstream ids a run's filter holds: parts
	// of 128 bytes.
	bloomChunkIDs  = 1024
	bloomPartBytes = bloomChunkIDs * bloomBitsPerID / 8 / bloomParts
	// bloomChunkRows bounds a run's rows, which a lookup reads all of when
	// its filter may hold the id: about a millisecond
	bloomChunkRows = 4096
	// maxIDRanges bounds the id ranges one statement names: more are
	// merged across their smallest gaps (a superset, so still exact), so
	// the statement stays far below SQLite's expression depth.
	maxIDRanges = 64
)

// bloomHash hashes id (64-bit FNV-1a, mixed by MurmurHash3's finalizer so
// that every bit depends on every byte) into the part of the filter it
// goes to and the two halves its probes are made of (double hashing).
func bloomHash(id string) (part int, h1, h2 uint32) {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return int(h >> 60), uint32(h), uint32(h>>28) | 1
}

// bloomAdd adds id to the filter of a run, its parts one after the other.
func bloomAdd(bits []byte, id string) {
	part, h1, h2 := bloomHash(id)
	p := bits[part*bloomPartBytes : (part+1)*bloomPartBytes]
	m := uint32(len(p) * 8)
	for i := uint32(0); i < bloomHashes; i++ {
		b := (h1 + i*h2) % m
		p[b/8] |= 1 << (b % 8)
	}
}

// bloomMayHold reports whether id may be among the ids of a filter's
// part (of the part bloomPartOf(id)); false is certain.
func bloomMayHold(part []byte, id string) bool {
	if len(part) == 0 {
		return true // not a filter this build made: search its range
	}
	_, h1, h2 := bloomHash(id)
	m := uint32(len(part) * 8)
	for i := uint32(0); i < bloomHashes; i++ {
		b := (h1 + i*h2) % m
		if part[b/8]&(1<<(b%8)) == 0 {
			return false
		}
	}
	return true
}

// bloomPartOf is the part of a filter that would hold id.
func bloomPartOf(id string) int {
	part, _, _ := bloomHash(id)
	return part
}

// bloomChunk is a run of consecutive row ids of one day's table, every
// row of it written by this store, and the filter of their upstream ids.
type bloomChunk struct {
	day, first, last int64
	ids              int // upstream ids added to bits
	bits             []byte
}

// full reports a run that takes no more rows: its filter's ids in, or
// as many rows as a lookup whose filter says yes should read (rows with
// no upstream id, refused requests, add none to the filter but are read).
func (c *bloomChunk) full() bool {
	return c.ids >= bloomChunkIDs || c.last-c.first+1 >= bloomChunkRows
}

// openBlooms are, per day, the run the writer is filling: its filter is
// kept in memory and written once the run is final (its 1,024 ids in, or
// rows of another writer after it, or its day two days behind, or the
// store closing), so a run costs its 16 parts once however many batches
// it took. A run not written (the process killed) is a range no filter
// covers, which a lookup reads whole: slower, never wrong.
type openBlooms struct {
	mu    sync.Mutex
	byDay map[int64]*bloomChunk
}

func (o *openBlooms) get(day int64) *bloomChunk {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byDay[day]
}

// forget drops what is known of the days: all of them when none is named.
func (o *openBlooms) forget(days ...int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(days) == 0 {
		o.byDay = nil
	}
	for _, d := range days {
		delete(o.byDay, d)
	}
}

// all is every open run, for the store's close.
func (o *openBlooms) all() *bloomBatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := &bloomBatch{}
	for _, c := range o.byDay {
		b.final = append(b.final, c)
	}
	return b
}

// bloomBatch is what one write transaction does to the filters: the runs
// its rows went to, and the open runs it ends.
type bloomBatch struct {
	open   *openBlooms // nil: no run stays open, all are written
	chunks []*bloomChunk
	final  []*bloomChunk // runs written: they take no more rows
	stay   []*bloomChunk // runs kept open once the batch commits
}

// add notes that row id of day's table was written with the upstream id
// up ("" for none). A day's rows in one transaction take consecutive ids;
// a row that does not follow its day's last starts a run of its own.
func (b *bloomBatch) add(day, id int64, up string) {
	var c *bloomChunk
	for i := len(b.chunks) - 1; i >= 0; i-- {
		if b.chunks[i].day == day {
			c = b.chunks[i]
			break
		}
	}
	if c == nil && b.open != nil {
		// the first row of the day in this batch: extend a copy of the
		// open run, kept only once the batch commits; one it cannot
		// extend is final
		if o := b.open.get(day); o != nil {
			if id == o.last+1 && !o.full() {
				c = &bloomChunk{day: day, first: o.first, last: o.last, ids: o.ids, bits: slices.Clone(o.bits)}
				b.chunks = append(b.chunks, c)
			} else {
				b.final = append(b.final, o)
			}
		}
	}
	if c == nil || id != c.last+1 || c.full() {
		c = &bloomChunk{day: day, first: id, last: id - 1, bits: make([]byte, bloomParts*bloomPartBytes)}
		b.chunks = append(b.chunks, c)
	}
	c.last = id
	if up != "" {
		bloomAdd(c.bits, up)
		c.ids++
	}
}

// settle decides, once the batch's rows are in, which runs stay open (the
// last of each day, not full, of a day at most one behind the batch's
// newest) and which are final: the others, and the open runs of days two
// or more behind, which take no rows now but late ones.
func (b *bloomBatch) settle() (open []*bloomChunk) {
	newest := int64(math.MinInt64)
	last := map[int64]*bloomChunk{}
	for _, c := range b.chunks {
		newest = max(newest, c.day)
		last[c.day] = c
	}
	for _, c := range b.chunks {
		if b.open != nil && last[c.day] == c && !c.full() && c.day >= newest-1 {
			open = append(open, c)
		} else {
			b.final = append(b.final, c)
		}
	}
	if b.open != nil && len(b.chunks) > 0 {
		b.open.mu.Lock()
		for d, c := range b.open.byDay {
			if d < newest-1 && last[d] == nil {
				b.final = append(b.final, c)
			}
		}
		b.open.mu.Unlock()
	}
	return open
}

// write stores within tx the runs that are final, part by part (a run
// extended over the rows it had).
func (b *bloomBatch) write(ctx context.Context, tx execer) error {
	b.stay = b.settle()
	for _, c := range b.final {
		for part := range bloomParts {
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO usage_upstream_blooms (part, first_id, last_id, bits)
				VALUES (?, ?, ?, ?)`, part, c.first, c.last, c.bits[part*bloomPartBytes:(part+1)*bloomPartBytes]); err != nil {
				return fmt.Errorf("upstream id filter of %s: %w", usageDayTable(c.day), err)
			}
		}
	}
	return nil
}

// committed keeps open the runs write left open and forgets those it
// wrote, once the batch's transaction has committed.
func (b *bloomBatch) committed() {
	if b.open == nil {
		return
	}
	b.open.mu.Lock()
	defer b.open.mu.Unlock()
	for _, c := range b.final {
		if o := b.open.byDay[c.day]; o != nil && o.first == c.first {
			delete(b.open.byDay, c.day)
		}
	}
	if b.open.byDay == nil {
		b.open.byDay = map[int64]*bloomChunk{}
	}
	for _, c := range b.stay {
		b.open.byDay[c.day] = c
	}
}

// dayIDs are the first and the last id a day's rows may have.
func dayIDs(d int64) (first, last int64) { return d << 32, d<<32 | (1<<32 - 1) }

// forgetBloomsOfNewDay drops the filters of day d when its table is not
// there yet: left by a process that dropped the table without them (a
// build before the filters), they would describe rows that are gone and
// hide the ones the table's new rows take their ids from.
func forgetBloomsOfNewDay(ctx context.Context, tx execer, d int64) error {
	lo, hi := dayIDs(d)
	_, err := tx.ExecContext(ctx, `DELETE FROM usage_upstream_blooms WHERE `+bloomDayWhere+`
		AND NOT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?)`, lo, hi, usageDayTable(d))
	return err
}

// bloomDayWhere keeps the filters of a day's ids (two arguments: dayIDs),
// every part's, by the table's key.
var bloomDayWhere = func() string {
	parts := make([]string, bloomParts)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	return `part IN (` + strings.Join(parts, ", ") + `) AND first_id BETWEEN ? AND ?`
}()

// idRange is rows first..last of a day table, both included.
type idRange struct{ first, last int64 }

// upstreamIDRanges is where in day d's table a row with the upstream id
// up may be: the ranges whose filter may hold it and those no filter
// covers, at most maxIDRanges, in order; none when the table has no row
// that can match. filtered is false for a day with no filter at all (one
// written before them), which is searched as it was, by whatever index
// the rest of the lookup names. The filters are read before the table's
// bounds, so rows written meanwhile fall in a range no filter read
// covers, or after the last: newer than the lookup.
func (s *Store) upstreamIDRanges(ctx context.Context, d int64, up string) (ranges []idRange, filtered bool, err error) {
	lo, hi := dayIDs(d)
	rows, err := s.r.QueryContext(ctx, `SELECT first_id, last_id, bits FROM usage_upstream_blooms
		WHERE part = ? AND first_id BETWEEN ? AND ? ORDER BY first_id`, bloomPartOf(up), lo, hi)
	if err != nil {
		return nil, false, fmt.Errorf("upstream id filters of %s: %w", usageDayTable(d), err)
	}
	var covered, maybe []idRange
	for rows.Next() {
		var r idRange
		var bits sql.RawBytes // read in place: a day has hundreds
		if err := rows.Scan(&r.first, &r.last, &bits); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("upstream id filters of %s: %w", usageDayTable(d), err)
		}
		covered = append(covered, r)
		if bloomMayHold(bits, up) {
			maybe = append(maybe, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("upstream id filters of %s: %w", usageDayTable(d), err)
	}
	if len(covered) == 0 {
		return nil, false, nil
	}
	var first, last sql.NullInt64
	// two subqueries: SQLite reads a lone MIN or MAX of the rowid from
	// one end of the table, but both in one SELECT by a scan of it
	t := usageDayTable(d)
	if err := s.r.QueryRowContext(ctx, `SELECT (SELECT MIN(id) FROM `+t+`), (SELECT MAX(id) FROM `+t+`)`).Scan(&first, &last); err != nil {
		return nil, false, fmt.Errorf("upstream id lookup in %s: %w", t, err)
	}
	if !first.Valid {
		return nil, true, nil // an empty table
	}
	return mergeIDRanges(append(maybe, uncovered(idRange{first.Int64, last.Int64}, covered)...), maxIDRanges), true, nil
}

// uncovered is the parts of all that no range of covered (in order of
// their first ids) holds.
func uncovered(all idRange, covered []idRange) []idRange {
	var out []idRange
	next := all.first
	for _, c := range covered {
		if c.first > next {
			out = append(out, idRange{next, min(c.first-1, all.last)})
		}
		next = max(next, c.last+1)
		if next > all.last {
			return out
		}
	}
	if next <= all.last {
		out = append(out, idRange{next, all.last})
	}
	return out
}

// mergeIDRanges orders rs, joins those that touch or overlap, and then
// joins neighbours across the smallest gaps until at most n are left.
func mergeIDRanges(rs []idRange, n int) []idRange {
	slices.SortFunc(rs, func(a, b idRange) int { return cmp.Compare(a.first, b.first) })
	var out []idRange
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && r.first <= out[k].last+1 {
			out[k].last = max(out[k].last, r.last)
			continue
		}
		out = append(out, r)
	}
	if len(out) <= n {
		return out
	}
	// the (len-n) smallest gaps go: a gap no larger than the cut, taken
	// in order until enough are gone
	gaps := make([]int64, len(out)-1)
	for i := range gaps {
		gaps[i] = out[i+1].first - out[i].last
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	cut, drop := sorted[len(out)-n-1], len(out)-n
	merged := make([]idRange, 1, n)
	merged[0] = out[0]
	for i, g := range gaps {
		if g <= cut && drop > 0 {
			merged[len(merged)-1].last = out[i+1].last
			drop--
			continue
		}
		merged = append(merged, out[i+1])
	}
	return merged
}

// idRangesWhere is the condition that keeps rows of rs.
func idRangesWhere(rs []idRange, arg func(any) string) string {
	var b strings.Builder
	b.WriteString("(")
	for i, r := range rs {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("id BETWEEN " + arg(r.first) + " AND " + arg(r.last))
	}
	b.WriteString(")")
	return b.String()
}
