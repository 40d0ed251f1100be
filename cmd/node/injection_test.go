package main

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One injection state for the whole cluster: a counter kept by injected
// JavaScript counts every request, whichever member takes it, as one
// mountebank would; concurrent requests through different members never
// both count from the same state (the loser of a race is a 503 that says
// so, its change dropped).
func TestInjectionStateAcrossTheCluster(t *testing.T) {
	ps := clusterWith(t, nil, "-allowInjection")
	code, body, h := callAs("POST", "http://"+ps[0].http+"/imposters", `{"protocol":"http","port":4630,"stubs":[
		{"predicates":[{"inject":"config => { config.state.seen = (config.state.seen || 0) + 1; return true; }"}],
		 "responses":[{"inject":"(config, injectState, logger, callback, imposterState) => ({ body: String(imposterState.seen) })"}]}]}`, "")
	require.Equal(t, http.StatusCreated, code, body)
	require.Empty(t, h.Get("X-Fenceline-Unconfirmed"))

	for i := 1; i <= 30; i++ {
		p := ps[i%3]
		code, body, _ := callAs("GET", "http://"+host(p)+":4630/", "", "")
		require.Equal(t, http.StatusOK, code, "request %d through %s: %s", i, p.name, body)
		require.Equal(t, strconv.Itoa(i), body, "request %d through %s", i, p.name)
	}

	var mu sync.Mutex
	seen := map[int]string{}
	ok, conflicts := 0, 0
	var wg sync.WaitGroup
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				code, body, h := callAs("GET", "http://"+host(ps[c])+":4630/", "", "")
				mu.Lock()
				switch code {
				case http.StatusOK:
					n, err := strconv.Atoi(body)
					assert.NoError(t, err, body)
					assert.Empty(t, seen[n], "count %d answered twice: through %s and %s", n, seen[n], ps[c].name)
					seen[n] = ps[c].name
					ok++
				case http.StatusServiceUnavailable:
					assert.Equal(t, "injection_state_conflict", h.Get("X-Fenceline-Unavailable"), body)
					conflicts++
				default:
					assert.Fail(t, "unexpected answer", "%d %s", code, body)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("concurrent: %d answered, %d conflicts", ok, conflicts)
	require.Positive(t, ok)
	code, body, _ = callAs("GET", "http://"+host(ps[1])+":4630/", "", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, fmt.Sprint(30+ok+1), body, "every answered request counted once, every conflict not at all")
}
