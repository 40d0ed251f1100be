package fixture

import . "time"

func dotted() Duration {
	_ = Now()     // planted: no-wall-clock through a dot import
	return Second // allowed
}
