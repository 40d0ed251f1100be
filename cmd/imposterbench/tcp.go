package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// tcpEcho is the tcp workload's name: a stub answering "pong\n" to any
// packet, driven by tcpLoad.
const tcpEcho = "g-tcp-echo"

// tcpLoad drives a tcp imposter at addr for d with conns connections,
// each sending "ping\n" and reading one line back, in turn: requests per
// second, latency percentiles, and errors as wrk counts them (a wrong
// answer is a non-2xx).
func tcpLoad(ctx context.Context, addr string, conns int, d time.Duration) (wrkResult, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var res wrkResult
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	var firstErr error
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var connErr, readErr, wrong int64
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				res.Connect += connErr
				res.Read += readErr
				res.Non2xx += wrong
				mu.Unlock()
			}()
			c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
			if err != nil {
				connErr++
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				start := time.Now()
				_ = c.SetDeadline(start.Add(30 * time.Second))
				if _, err := c.Write([]byte("ping\n")); err != nil {
					readErr++
					return
				}
				line, err := br.ReadString('\n')
				if err != nil {
					readErr++
					return
				}
				if line != "pong\n" {
					wrong++
				}
				mine = append(mine, time.Since(start))
			}
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		return res, fmt.Errorf("no request answered (%v)", firstErr)
	}
	slices.Sort(lat)
	res.Requests = int64(len(lat))
	res.RPS = float64(len(lat)) / d.Seconds()
	res.P50 = lat[len(lat)/2]
	res.P99 = lat[len(lat)*99/100]
	return res, nil
}
