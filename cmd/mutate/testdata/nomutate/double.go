//fenceline:nomutate a test double no node runs

package nomutate

func g(x int) bool { return x > 1 }
