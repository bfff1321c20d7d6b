// Command bench_client is grpc-go as a load generator for the benchmarks' server section.
//
//	bench_client -target unix:/path/sock -threads 8 -calls 1000 -connections shared -size 200
//
// Every goroutine ("thread") makes -calls unary calls of /bench.Echo/Echo one after the other,
// all released together once every connection is up and warm; -connections shared gives them
// one connection, per-thread one each. It checks every echo and prints one JSON object, as
// bench/workloads.py's throughput workload does: {"calls", "seconds", "calls_per_s"} or
// {"error"}. GOMAXPROCS is grpc-go's default (all cores), as an antrea-agent would run it.
//
//	bench_client -target unix:/path/sock -mode stream -threads 4 -count 10000 -size 16 -reps 5
//
// -mode stream reads server streams of /bench.Echo/Stream instead: every goroutine asks for
// -count messages of -size bytes (the request is the ASCII "<count> <size>", as
// bench/peers.py's stream handlers parse it) and reads them all, every goroutine's stream in
// flight at once. One untimed round of streams first, then -reps timed rounds; it prints
// {"messages_per_s": [one figure per round]} (all goroutines' messages over the round's wall
// time), the shape of bench/workloads.py's stream workload. grpc-go reads a message in far
// less CPU than any Python server spends sending one, so the server, not this client, is what
// sets the rate.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"

	"mginterop/wire"
)

const echoMethod = "/bench.Echo/Echo"
const streamMethod = "/bench.Echo/Stream"

var streamDesc = grpc.StreamDesc{StreamName: "Stream", ServerStreams: true}

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

// readStream asks for count messages of size bytes and checks that exactly those arrive.
func readStream(conn *grpc.ClientConn, count, size int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	stream, err := conn.NewStream(ctx, &streamDesc, streamMethod)
	if err != nil {
		return err
	}
	request := wire.Raw(fmt.Sprintf("%d %d", count, size))
	if err := stream.SendMsg(&request); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	received := 0
	for {
		var message wire.Raw
		err := stream.RecvMsg(&message)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(message) != size {
			return fmt.Errorf("stream message of %d bytes, not %d", len(message), size)
		}
		received++
	}
	if received != count {
		return fmt.Errorf("stream of %d messages, not %d", received, count)
	}
	return nil
}

// streamRound runs one stream per goroutine, all released together; it returns the wall time.
func streamRound(conns []*grpc.ClientConn, threads, count, size int) (float64, error) {
	start := make(chan struct{})
	errs := make(chan error, threads)
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go func(conn *grpc.ClientConn) {
			defer wg.Done()
			<-start
			if err := readStream(conn, count, size); err != nil {
				errs <- err
			}
		}(conns[t%len(conns)])
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began).Seconds()
	close(errs)
	for err := range errs {
		return 0, err
	}
	return elapsed, nil
}

func runStreams(target string, threads, count, size, reps int, perThread bool) (map[string]interface{}, error) {
	number := 1
	if perThread {
		number = threads
	}
	conns := make([]*grpc.ClientConn, number)
	for i := range conns {
		conn, err := dial(target)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		conns[i] = conn
	}
	rates := []float64{}
	for rep := 0; rep <= reps; rep++ {
		elapsed, err := streamRound(conns, threads, count, size)
		if err != nil {
			return nil, err
		}
		if rep > 0 { // the first round warms up connections, windows and the server
			rates = append(rates, float64(threads*count)/elapsed)
		}
	}
	return map[string]interface{}{"messages_per_s": rates}, nil
}

func main() {
	target := flag.String("target", "", "server: unix:PATH, unix-abstract:NAME or HOST:PORT")
	threads := flag.Int("threads", 8, "concurrent callers")
	calls := flag.Int("calls", 1000, "calls per caller")
	size := flag.Int("size", 200, "request bytes")
	warmup := flag.Int("warmup", 20, "untimed calls per connection first")
	connections := flag.String("connections", "shared", "shared or per-thread")
	mode := flag.String("mode", "unary", "unary (echo calls) or stream (server streams)")
	count := flag.Int("count", 10000, "messages per stream (stream mode)")
	reps := flag.Int("reps", 5, "timed rounds of streams (stream mode)")
	flag.Parse()
	if *target == "" || (*connections != "shared" && *connections != "per-thread") ||
		(*mode != "unary" && *mode != "stream") {
		fmt.Fprintln(os.Stderr, "usage: bench_client -target T [-mode unary|stream -threads N -calls N -count N -reps N -size N -connections shared|per-thread]")
		os.Exit(2)
	}
	wire.RegisterRawCodec()
	var result map[string]interface{}
	var err error
	if *mode == "stream" {
		result, err = runStreams(*target, *threads, *count, *size, *reps, *connections == "per-thread")
	} else {
		result, err = run(*target, *threads, *calls, *size, *warmup, *connections == "per-thread")
	}
	if err != nil {
		result = map[string]interface{}{"error": err.Error()}
	}
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}
