//fenceline:nomutate the planted AddedGroupTakesTable bug's directory: it runs only while that bug is on, so it defends nothing

package node

import (
	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/partition"
)

// takeTable is the bug AddedGroupTakesTable: when the groups divide the
// table, d spread over all of them at once, every partition the table
// puts elsewhere published there with no move.
func takeTable(d *fleet.Directory) *fleet.Directory {
	if partition.Compatible(d.Groups()) != nil {
		return d
	}
	d, _ = d.WithTarget(d.Groups())
	for {
		ps, _, to := d.Misplaced(partition.Count)
		if len(ps) == 0 {
			return d
		}
		d, _ = d.Fence(ps, to)
		d, _ = d.Publish(ps)
	}
}
