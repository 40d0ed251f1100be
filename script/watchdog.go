package script

import (
	"runtime/metrics"
	"sync"
	"time"
)

// goja has no heap limit of its own: a function can build a string or an
// array until the process runs out of memory long before its time budget
// ends. The watchdog bounds that: while any engine runs JavaScript, it
// samples the heap every watchdogEvery, and when the heap's live objects
// pass MaxHeapBytes it interrupts every engine then running, whose calls
// fail with an error saying so. One watchdog serves the process; it runs
// only while JavaScript does.

// MaxHeapBytes is the heap, in bytes of live objects, past which running
// JavaScript is stopped. A node's own heap is far below it.
var MaxHeapBytes uint64 = 2 << 30

const watchdogEvery = 2 * time.Millisecond

var watchdog struct {
	mu      sync.Mutex
	running map[*Engine]uint64 // engine → the gen of its entry
	active  bool
}

// watch registers an entry into JavaScript (engine e, entry gen g) and
// starts the sampler if it is not running.
func watch(e *Engine, g uint64) {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	if watchdog.running == nil {
		watchdog.running = map[*Engine]uint64{}
	}
	watchdog.running[e] = g
	if !watchdog.active {
		watchdog.active = true
		go sample()
	}
}

// unwatch ends the entry.
func unwatch(e *Engine) {
	watchdog.mu.Lock()
	delete(watchdog.running, e)
	watchdog.mu.Unlock()
}

func sample() {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	t := time.NewTicker(watchdogEvery)
	defer t.Stop()
	for range t.C {
		watchdog.mu.Lock()
		if len(watchdog.running) == 0 {
			watchdog.active = false
			watchdog.mu.Unlock()
			return
		}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() > MaxHeapBytes {
			for e, g := range watchdog.running { //fenceline:unordered interrupting each
				e.interruptIf(g, errMemory)
			}
		}
		watchdog.mu.Unlock()
	}
}
