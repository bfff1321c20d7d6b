// Command bench_client is grpc-go as a load generator for the benchmarks' server section.
//
//	bench_client -target unix:/path/sock -threads 8 -calls 1000 -connections shared -size 200
//
// Every goroutine ("thread") makes -calls unary calls of /bench.Echo/Echo one after the other,
// all released together once every connection is up and warm; -connections shared gives them
// one connection, per-thread one each. It checks every echo and prints one JSON object, as
// bench/workloads.py's throughput workload does: {"calls", "seconds", "calls_per_s"} or
// {"error"}. GOMAXPROCS is grpc-go's default (all cores), as an antrea-agent would run it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"

	"mginterop/wire"
)

const echoMethod = "/bench.Echo/Echo"

func makePayload(size int) []byte {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i % 256) // bench/workloads.py make_payload's pattern
	}
	return payload
}

func dial(target string) (*grpc.ClientConn, error) {
	return grpc.Dial("passthrough:///"+target, grpc.WithInsecure(),
		grpc.WithContextDialer(wire.Dialer), grpc.WithAuthority(wire.Authority(target)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32),
			grpc.MaxCallSendMsgSize(math.MaxInt32)))
}

func echo(conn *grpc.ClientConn, payload []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	request := wire.Raw(payload)
	var reply wire.Raw
	if err := conn.Invoke(ctx, echoMethod, &request, &reply); err != nil {
		return err
	}
	if !bytes.Equal(reply, payload) {
		return fmt.Errorf("echo mismatch: sent %d bytes, got %d", len(payload), len(reply))
	}
	return nil
}

func run(target string, threads, calls, size, warmup int, perThread bool) (map[string]interface{}, error) {
	payload := makePayload(size)
	count := 1
	if perThread {
		count = threads
	}
	conns := make([]*grpc.ClientConn, count)
	for i := range conns {
		conn, err := dial(target)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		for j := 0; j < warmup; j++ {
			if err := echo(conn, payload); err != nil {
				return nil, fmt.Errorf("warm-up: %v", err)
			}
		}
		conns[i] = conn
	}
	start := make(chan struct{})
	errs := make(chan error, threads)
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go func(conn *grpc.ClientConn) {
			defer wg.Done()
			<-start
			for i := 0; i < calls; i++ {
				if err := echo(conn, payload); err != nil {
					errs <- err
					return
				}
			}
		}(conns[t%count])
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began).Seconds()
	close(errs)
	failed := 0
	var first error
	for err := range errs {
		if first == nil {
			first = err
		}
		failed++
	}
	if first != nil {
		return nil, fmt.Errorf("%d client threads failed; first: %v", failed, first)
	}
	total := threads * calls
	return map[string]interface{}{
		"calls": total, "seconds": elapsed, "calls_per_s": float64(total) / elapsed,
	}, nil
}

func main() {
	target := flag.String("target", "", "server: unix:PATH, unix-abstract:NAME or HOST:PORT")
	threads := flag.Int("threads", 8, "concurrent callers")
	calls := flag.Int("calls", 1000, "calls per caller")
	size := flag.Int("size", 200, "request bytes")
	warmup := flag.Int("warmup", 20, "untimed calls per connection first")
	connections := flag.String("connections", "shared", "shared or per-thread")
	flag.Parse()
	if *target == "" || (*connections != "shared" && *connections != "per-thread") {
		fmt.Fprintln(os.Stderr, "usage: bench_client -target T [-threads N -calls N -size N -connections shared|per-thread]")
		os.Exit(2)
	}
	wire.RegisterRawCodec()
	result, err := run(*target, *threads, *calls, *size, *warmup, *connections == "per-thread")
	if err != nil {
		result = map[string]interface{}{"error": err.Error()}
	}
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}
