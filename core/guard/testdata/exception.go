package fixture

func exceptions(m map[string]int) int {
	total := 0
	//fenceline:unordered order does not reach output: summing counts
	for _, v := range m { // allowed: excused from the line above
		total += v
	}
	for _, v := range m { //fenceline:unordered summing again, same-line form
		total += v
	}

	//fenceline:unordered
	for _, v := range m { // planted: map-order; the exception above it is bad-exception (no reason)
		total += v
	}

	//fenceline:unordered too far away: a blank line separates it from the range

	for _, v := range m { // planted: map-order; the exception two lines up excuses nothing
		total += v
	}

	//fenceline:unorderd summing counts
	for _, v := range m { // planted: map-order; the misspelt directive above is bad-exception
		total += v
	}
	return total
}
