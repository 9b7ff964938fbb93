// Command sentinel_failover drives go-redis's FailoverClient through a Sentinel failover: it
// writes INCRs to one key through the client (each confirmed with WAIT 1), says "ready" once
// writes flow, and keeps writing while the test kills the primary. It ends once writes
// succeed again against a different primary, printing one JSON line: the master before and
// after (as the sentinels name it), the highest INCR value WAIT confirmed, and how long
// writes failed. tests/python/test_sentinel_clients.py runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

type result struct {
	MasterBefore string  `json:"master_before"`
	MasterAfter  string  `json:"master_after"`
	Confirmed    int64   `json:"confirmed"`
	Writes       int64   `json:"writes"`
	OutageS      float64 `json:"outage_s"`
}

func main() {
	sentinels := flag.String("sentinels", "", "comma-separated sentinel addresses")
	key := flag.String("key", "go", "the key INCRed")
	password := flag.String("password", "", "the data nodes' password")
	limit := flag.Duration("limit", 40*time.Second, "give up after this long")
	flag.Parse()
	ctx := context.Background()
	addrs := strings.Split(*sentinels, ",")
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "mymaster",
		SentinelAddrs: addrs,
		Password:      *password,
		DialTimeout:   500 * time.Millisecond,
		ReadTimeout:   1 * time.Second,
		WriteTimeout:  1 * time.Second,
		MaxRetries:    -1,
	})
	s := redis.NewSentinelClient(&redis.Options{Addr: addrs[0]})
	master := func() string {
		a, err := s.GetMasterAddrByName(ctx, "mymaster").Result()
		if err != nil || len(a) != 2 {
			return ""
		}
		return a[0] + ":" + a[1]
	}
	var r result
	r.MasterBefore = master()
	deadline := time.Now().Add(*limit)
	var failedSince time.Time
	ready := false
	for time.Now().Before(deadline) {
		v, err := c.Incr(ctx, *key).Result()
		if err == nil {
			n, werr := c.Do(ctx, "WAIT", 1, 500).Int64()
			if werr == nil && n >= 1 && v > r.Confirmed {
				r.Confirmed = v
			}
		}
		if err != nil {
			if failedSince.IsZero() {
				failedSince = time.Now()
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		r.Writes++
		if !ready && r.Writes >= 50 {
			ready = true
			fmt.Println("ready")
		}
		if !failedSince.IsZero() {
			if m := master(); m != "" && m != r.MasterBefore {
				r.OutageS = time.Since(failedSince).Seconds()
				r.MasterAfter = m
				out, _ := json.Marshal(r)
				fmt.Println(string(out))
				return
			}
		}
	}
	out, _ := json.Marshal(r)
	fmt.Fprintln(os.Stderr, "no failover seen:", string(out))
	os.Exit(1)
}
