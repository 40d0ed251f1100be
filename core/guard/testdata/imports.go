package fixture

import (
	_ "crypto/rand"                                    // planted: not allowed
	_ "github.com/anishathalye/porcupine"              // planted: not allowed
	_ "github.com/cespare/xxhash/v2"                   // allowed
	_ "github.com/fenceline/fenceline/clock"           // allowed: a seam
	_ "github.com/fenceline/fenceline/core/kv"         // allowed: core
	_ "github.com/fenceline/fenceline/linearizability" // planted: a checker
	_ "github.com/fenceline/fenceline/sim"             // planted: the simulator
	_ "github.com/fenceline/fenceline/sim/simtest"     // planted: a test helper
	_ "go.etcd.io/bbolt"                               // planted: not allowed
	_ "go.etcd.io/bbolt/errors"                        // planted: not allowed (subpackage)
	_ "go.etcd.io/raft/v3"                             // planted: only sub may
	_ "log"                                            // planted: not on the list
	_ "math/rand"                                      // planted: not allowed
	_ "math/rand/v2"                                   // planted: not allowed
	_ "net"                                            // planted: not allowed
	_ "net/http"                                       // planted: not allowed
	_ "net/netip"                                      // allowed: pure address values
	_ "os"                                             // planted: not allowed
	_ "os/exec"                                        // planted: not allowed (subpackage)
	_ "runtime"                                        // planted: not on the list
	_ "strings"                                        // allowed
	_ "sync"                                           // planted: not allowed
	_ "sync/atomic"                                    // planted: not allowed
	_ "syscall"                                        // planted: not on the list
)
