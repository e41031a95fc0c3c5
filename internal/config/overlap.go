package config

// placedRange is a pool's address range and where it was written.
type placedRange struct {
	r    AddrRange
	pool string
	line int
}

// checkOverlaps reports each range, in file order, that shares an address
// with a range written before it, naming the first such range. Files hold
// tens of ranges, so comparing every pair is cheap.
func checkOverlaps(ranges []placedRange, p *problems) {
	for i, cur := range ranges {
		for _, prev := range ranges[:i] {
			if prev.r.overlaps(cur.r) {
				reportOverlap(p, prev, cur)
				break
			}
		}
	}
}

func reportOverlap(p *problems, earlier, later placedRange) {
	if earlier.pool == later.pool {
		p.add(later.line, sectionLabel("Pool", later.pool), "addresses",
			"%s overlaps %s on line %d of this pool", later.r, earlier.r, earlier.line)
		return
	}
	p.add(later.line, sectionLabel("Pool", later.pool), "addresses",
		"%s overlaps %s of [Pool %q] on line %d", later.r, earlier.r, earlier.pool, earlier.line)
}
