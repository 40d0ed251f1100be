package fixture

import (
	_ "crypto/rand"                       // planted: banned-import
	_ "github.com/anishathalye/porcupine" // planted: banned-import
	_ "go.etcd.io/bbolt"                  // planted: banned-import
	_ "go.etcd.io/bbolt/errors"           // planted: banned-import (subpackage)
	_ "math/rand"                         // planted: banned-import
	_ "math/rand/v2"                      // planted: banned-import
	_ "net"                               // planted: banned-import
	_ "net/http"                          // planted: banned-import
	_ "net/netip"                         // allowed: pure address values
	_ "os"                                // planted: banned-import
	_ "os/exec"                           // planted: banned-import (subpackage)
	_ "strings"                           // allowed
	_ "sync"                              // planted: banned-import
	_ "sync/atomic"                       // planted: banned-import
)
