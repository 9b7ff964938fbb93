// Command cluster_client drives go-redis's ClusterClient through whatever the test does to the
// cluster (a reshard, a master killed): it INCRs keys PREFIX:0 … PREFIX:N-1 in turn, spread over
// the slots, each INCR followed by WAIT 1 100 on the same node's connection, and keeps the
// highest value WAIT confirmed per key. It prints "ready" after its first INCR, then a line
// "incrs N errors M" now and then for the test to see progress, and on a line "stop" (or EOF)
// on stdin one JSON line: INCRs, errors, confirmed values, redirections it followed and the
// longest time without a successful INCR. tests/python/test_cluster_clients.py runs it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

type result struct {
	Incrs     int64            `json:"incrs"`
	Errors    int64            `json:"errors"`
	Redirects int64            `json:"redirects"`
	Confirmed map[string]int64 `json:"confirmed"`
	MaxGapS   float64          `json:"max_gap_s"`
}

// One INCR and its WAIT, as the node-level hook below sees them.
type pair struct {
	incr, wait redis.Cmder
	// Whether the last batch that carried either command carried both, on one node's
	// connection, and both succeeded: only then does WAIT's count cover the INCR.
	together bool
	// MOVED and ASK replies to the INCR, each sent on to another node by go-redis.
	redirects int64
}

type pairKey struct{}

// sameConn is a hook on every node client of the cluster client. A cluster pipeline hands
// each node one batch of its commands, written and read on one pooled connection
// (ClusterClient.processPipelineNode), and this hook sees each batch.
//
// Why it is needed: go-redis routes a keyless command in a pipeline (WAIT) to the slot of the
// first keyed one (mapCmdsByNode's preferredRandomSlot), so INCR and WAIT leave together for
// the key's master. But on MOVED or ASK only the INCR is sent again, to the other node (with
// ASKING first for ASK), while the WAIT already answered on the first one: a count that says
// nothing about the INCR. The hook tells the cases apart.
type sameConn struct{}

func (sameConn) DialHook(next redis.DialHook) redis.DialHook { return next }

func (sameConn) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (sameConn) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		p, ok := ctx.Value(pairKey{}).(*pair)
		if !ok {
			return err
		}
		var incr, wait bool
		for _, c := range cmds {
			switch c {
			case p.incr:
				incr = true
				// The error is the reply this batch got, before a retry elsewhere resets it.
				if e := c.Err(); e != nil && (strings.HasPrefix(e.Error(), "MOVED ") || strings.HasPrefix(e.Error(), "ASK ")) {
					p.redirects++
				}
			case p.wait:
				wait = true
			}
		}
		if incr || wait {
			p.together = incr && wait && p.incr.Err() == nil && p.wait.Err() == nil
		}
		return err
	}
}

func main() {
	addrs := flag.String("addrs", "", "comma-separated seed addresses of cluster nodes")
	prefix := flag.String("prefix", "go", "key prefix")
	keys := flag.Int("keys", 300, "how many keys")
	limit := flag.Duration("limit", 400*time.Second, "give up (exit 1) without a stop after this long")
	flag.Parse()

	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        strings.Split(*addrs, ","),
		DialTimeout:  500 * time.Millisecond,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
	})
	// Before the first command, so that every node client the cluster client makes has it.
	c.OnNewNode(func(rdb *redis.Client) { rdb.AddHook(sameConn{}) })

	var stop atomic.Bool
	go func() {
		s := bufio.NewScanner(os.Stdin)
		for s.Scan() {
			if strings.TrimSpace(s.Text()) == "stop" {
				break
			}
		}
		stop.Store(true)
	}()

	r := result{Confirmed: map[string]int64{}}
	// The first few kinds of error, to stderr: what a failed run shows.
	seen := map[string]bool{}
	deadline := time.Now().Add(*limit)
	var lastOK time.Time
	lastReport := time.Now()
	for i := 0; !stop.Load(); i++ {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "no stop before the limit")
			os.Exit(1)
		}
		k := fmt.Sprintf("%s:%d", *prefix, i%*keys)
		p := &pair{}
		ctx := context.WithValue(context.Background(), pairKey{}, p)
		var incr *redis.IntCmd
		var wait *redis.Cmd
		_, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			incr = pipe.Incr(ctx, k)
			// Pipeliner has no Wait method; as a generic command WAIT is still known
			// to go-redis as keyless (its keylessCommands), so it goes with the INCR.
			wait = pipe.Do(ctx, "wait", 1, 100)
			p.incr, p.wait = incr, wait
			return nil
		})
		r.Redirects += p.redirects
		if incr.Err() != nil {
			r.Errors++
			if len(seen) < 10 && !seen[incr.Err().Error()] {
				seen[incr.Err().Error()] = true
				fmt.Fprintln(os.Stderr, "go-redis:", incr.Err())
			}
			time.Sleep(50 * time.Millisecond)
		} else {
			now := time.Now()
			if lastOK.IsZero() {
				fmt.Println("ready")
			} else if gap := now.Sub(lastOK).Seconds(); gap > r.MaxGapS {
				r.MaxGapS = gap
			}
			lastOK = now
			r.Incrs++
			v := incr.Val()
			n, werr := wait.Int64()
			if err == nil && werr == nil && p.together && n >= 1 && v > r.Confirmed[k] {
				r.Confirmed[k] = v
			}
		}
		if time.Since(lastReport) > 200*time.Millisecond {
			fmt.Printf("incrs %d errors %d\n", r.Incrs, r.Errors)
			lastReport = time.Now()
		}
	}
	if !lastOK.IsZero() {
		if gap := time.Since(lastOK).Seconds(); gap > r.MaxGapS {
			r.MaxGapS = gap
		}
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}
