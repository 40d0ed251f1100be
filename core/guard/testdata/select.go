package fixture

func wait(a, b chan int) int {
	select { // planted: no-select
	case v := <-a:
		return v
	case v := <-b:
		return v
	}
}

// switch is allowed: it looks like select but never waits.
func pick(n int) int {
	switch n {
	case 0:
		return 1
	}
	return n
}
