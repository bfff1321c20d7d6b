// Command interop_server is grpc-go serving grpc.testing.TestService, minigrpc's Go peer.
//
// It behaves as tests/interop/servicer.py (the Python twin, the reference for behaviour) and
// grpc's doc/interop-test-descriptions.md describe, and also serves /bench.Echo/Echo (raw bytes
// in, the same bytes out) for the benchmarks. Addresses, one -listen flag each:
//
//	unix:PATH  unix-abstract:NAME  tcp:HOST:PORT (port 0: the kernel picks)
//
// Once every listener is open it prints one "READY <client target>" line per -listen flag, in
// order, so a test waits on stdout rather than on a timer. With -stop-on-stdin-eof it stops
// when its standard input closes (the benchmark harness's polite stop).
//
// With -tls_cert FILE -tls_key FILE every address serves TLS (grpc-go's credentials.NewTLS,
// which offers ALPN h2 itself); adding -client_ca FILE requires and verifies a client
// certificate signed by that CA (mutual TLS).
//
// With -addons it also serves grpc-go's health service and server reflection, the peers of
// minigrpc's health and reflection clients.  -server_id names the server in fill_server_id's
// answers (a client balancing over several is counted by it).
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/ioutil"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // decompresses gzip requests
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	testpb "mginterop/grpc_testing"
	"mginterop/wire"
)

const (
	echoInitialKey  = "x-grpc-test-echo-initial"
	echoTrailingKey = "x-grpc-test-echo-trailing-bin"
	sleepKey        = "x-test-sleep-ms"
)

// serverID is what fill_server_id answers: -server_id, so that a client's load balancing over
// several of these servers can be counted.
var serverID = "grpc-go-interop-server"

// ---------------------------------------------------------------------------------------------
// Per-message response compression.
//
// grpc-go 1.33 (Debian's) chooses a call's compressor before the handler runs and has no API
// for a handler to compress one response and not another (SetSendCompressor came much later).
// The interop cases need exactly that (response_compressed, ResponseParameters.compressed), so
// the server installs a legacy grpc.Compressor that compresses only when the goroutine running
// the handler asked for it. grpc-go sends a message uncompressed (flag 0) when the compressor
// writes nothing, so "not asked" gives an uncompressed message under a "grpc-encoding: gzip"
// header, which PROTOCOL-HTTP2.md ("Compressed-Flag") allows. The handler and the write of
// its response run on one goroutine in grpc-go's server, for unary and streaming calls alike.

var (
	compressMu   sync.Mutex
	compressWish = map[uint64]bool{}
)

// goroutineID parses "goroutine N [" from this goroutine's stack header.
func goroutineID() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	fields := bytes.Fields(buf[:n])
	if len(fields) < 2 {
		return 0
	}
	id, _ := strconv.ParseUint(string(fields[1]), 10, 64)
	return id
}

func wantCompression(on bool) {
	id := goroutineID()
	compressMu.Lock()
	compressWish[id] = on
	compressMu.Unlock()
}

func forgetCompression() {
	id := goroutineID()
	compressMu.Lock()
	delete(compressWish, id)
	compressMu.Unlock()
}

type selectiveGzip struct{}

func (selectiveGzip) Type() string { return "gzip" }

func (selectiveGzip) Do(w io.Writer, p []byte) error {
	compressMu.Lock()
	on := compressWish[goroutineID()]
	compressMu.Unlock()
	if !on {
		return nil // nothing written: grpc-go sends the message as it is, flag 0
	}
	z := gzip.NewWriter(w)
	if _, err := z.Write(p); err != nil {
		return err
	}
	return z.Close()
}

// forgetAtEnd drops a call's wish when the call ends: a unary handler's wish must outlive the
// handler (its response is written after it returns), and grpc-go reports the end of a call on
// the goroutine that ran it. Goroutine ids are never reused, so this only bounds the map.
type forgetAtEnd struct{}

func (forgetAtEnd) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (forgetAtEnd) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (forgetAtEnd) HandleConn(context.Context, stats.ConnStats) {}
func (forgetAtEnd) HandleRPC(_ context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.End); ok {
		forgetCompression()
	}
}

// ---------------------------------------------------------------------------------------------
// TestService.

type testServer struct {
	testpb.UnimplementedTestServiceServer
}

// requestEncoding is the request's grpc-encoding (the transport stream knows it; grpc-go 1.33
// has no public accessor, so an interface assertion reaches the method).
func requestEncoding(ctx context.Context) string {
	stream := grpc.ServerTransportStreamFromContext(ctx)
	if r, ok := stream.(interface{ RecvCompress() string }); ok {
		return r.RecvCompress()
	}
	return ""
}

// waitIfAsked honours x-test-sleep-ms: the handler waits that long or until the call ends.
// A call that ended (deadline, cancellation) gets its status back, which the handler returns:
// grpc-go would otherwise send whatever the handler returns even after the deadline, and the
// client's own deadline would race with that late answer.
func waitIfAsked(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get(sleepKey)
	if len(values) == 0 {
		return nil
	}
	ms, err := strconv.Atoi(values[0])
	if err != nil || ms <= 0 {
		return nil
	}
	wait(ctx, time.Duration(ms)*time.Millisecond)
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return nil
}

func wait(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// echoMetadata sends the initial echo key in the headers and sets the -bin key as a trailer,
// before any status decision, so the echo happens on error too (as grpc-go's interop server).
func echoMetadata(ctx context.Context, sendHeader func(metadata.MD) error,
	setTrailer func(metadata.MD)) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(echoInitialKey); len(v) > 0 {
		if err := sendHeader(metadata.Pairs(echoInitialKey, v[0])); err != nil {
			return err
		}
	}
	if v := md.Get(echoTrailingKey); len(v) > 0 {
		setTrailer(metadata.Pairs(echoTrailingKey, v[0]))
	}
	return nil
}

func unaryEcho(ctx context.Context) error {
	return echoMetadata(ctx,
		func(md metadata.MD) error { return grpc.SendHeader(ctx, md) },
		func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) })
}

func streamEcho(stream grpc.ServerStream) error {
	return echoMetadata(stream.Context(), stream.SendHeader, stream.SetTrailer)
}

func echoedStatus(s *testpb.EchoStatus) error {
	if s != nil && s.Code != 0 {
		return status.Error(codes.Code(s.Code), s.Message)
	}
	return nil
}

func (testServer) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	if err := waitIfAsked(ctx); err != nil {
		return nil, err
	}
	if err := unaryEcho(ctx); err != nil {
		return nil, err
	}
	return &testpb.Empty{}, nil
}

func (testServer) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if err := waitIfAsked(ctx); err != nil {
		return nil, err
	}
	if err := unaryEcho(ctx); err != nil {
		return nil, err
	}
	if in.ExpectCompressed.GetValue() {
		if enc := requestEncoding(ctx); enc == "" || enc == "identity" {
			return nil, status.Error(codes.InvalidArgument,
				"expected a compressed request, but the message was not compressed")
		}
	}
	if in.ResponseType != testpb.PayloadType_COMPRESSABLE {
		return nil, status.Errorf(codes.InvalidArgument, "unsupported response_type %d", in.ResponseType)
	}
	if in.ResponseSize < 0 {
		return nil, status.Error(codes.InvalidArgument, "negative response_size")
	}
	if err := echoedStatus(in.ResponseStatus); err != nil {
		return nil, err
	}
	wantCompression(in.ResponseCompressed.GetValue())
	response := &testpb.SimpleResponse{
		Payload: &testpb.Payload{Type: testpb.PayloadType_COMPRESSABLE, Body: make([]byte, in.ResponseSize)},
	}
	if in.FillServerId {
		response.ServerId = serverID
	}
	return response, nil
}

// sendResponses answers one StreamingOutputCallRequest: its status, or one response per
// ResponseParameters entry, each after its interval.
func sendResponses(ctx context.Context, in *testpb.StreamingOutputCallRequest,
	send func(*testpb.StreamingOutputCallResponse) error) error {
	if err := echoedStatus(in.ResponseStatus); err != nil {
		return err
	}
	for _, p := range in.ResponseParameters {
		if p.Size < 0 {
			return status.Error(codes.InvalidArgument, "negative size")
		}
		if p.IntervalUs > 0 {
			wait(ctx, time.Duration(p.IntervalUs)*time.Microsecond)
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		wantCompression(p.Compressed.GetValue())
		err := send(&testpb.StreamingOutputCallResponse{
			Payload: &testpb.Payload{Type: testpb.PayloadType_COMPRESSABLE, Body: make([]byte, p.Size)},
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (testServer) StreamingOutputCall(in *testpb.StreamingOutputCallRequest,
	stream testpb.TestService_StreamingOutputCallServer) error {
	if err := waitIfAsked(stream.Context()); err != nil {
		return err
	}
	if err := streamEcho(stream); err != nil {
		return err
	}
	return sendResponses(stream.Context(), in, stream.Send)
}

func (testServer) StreamingInputCall(stream testpb.TestService_StreamingInputCallServer) error {
	if err := waitIfAsked(stream.Context()); err != nil {
		return err
	}
	if err := streamEcho(stream); err != nil {
		return err
	}
	var total int32
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: total})
		}
		if err != nil {
			return err
		}
		total += int32(len(in.GetPayload().GetBody()))
	}
}

func (testServer) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	if err := waitIfAsked(stream.Context()); err != nil {
		return err
	}
	if err := streamEcho(stream); err != nil {
		return err
	}
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := sendResponses(stream.Context(), in, stream.Send); err != nil {
			return err
		}
	}
}

func (testServer) HalfDuplexCall(stream testpb.TestService_HalfDuplexCallServer) error {
	if err := streamEcho(stream); err != nil {
		return err
	}
	var requests []*testpb.StreamingOutputCallRequest
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		requests = append(requests, in)
	}
	for _, in := range requests {
		if err := sendResponses(stream.Context(), in, stream.Send); err != nil {
			return err
		}
	}
	return nil
}

// UnimplementedCall is left to UnimplementedTestServiceServer: it answers UNIMPLEMENTED.

// ---------------------------------------------------------------------------------------------
// /bench.Echo/Echo: the benchmarks' method, bytes in and the same bytes out.

func echoHandler(_ interface{}, _ context.Context, dec func(interface{}) error,
	_ grpc.UnaryServerInterceptor) (interface{}, error) {
	var in wire.Raw
	if err := dec(&in); err != nil {
		return nil, err
	}
	return &in, nil
}

var echoService = grpc.ServiceDesc{
	ServiceName: "bench.Echo",
	HandlerType: (*interface{})(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Echo", Handler: echoHandler}},
}

// ---------------------------------------------------------------------------------------------
// Listening.

type listenFlags []string

func (l *listenFlags) String() string     { return strings.Join(*l, ",") }
func (l *listenFlags) Set(v string) error { *l = append(*l, v); return nil }

// listen opens one address and returns the listener and the target a client dials.
func listen(address string) (net.Listener, string, error) {
	switch {
	case strings.HasPrefix(address, "unix-abstract:"):
		name := strings.TrimPrefix(address, "unix-abstract:")
		l, err := net.Listen("unix", "@"+name) // Go's spelling of the abstract namespace
		return l, address, err
	case strings.HasPrefix(address, "unix:"):
		path := strings.TrimPrefix(address, "unix:")
		l, err := net.Listen("unix", path)
		return l, address, err
	case strings.HasPrefix(address, "tcp:"):
		l, err := net.Listen("tcp", strings.TrimPrefix(address, "tcp:"))
		if err != nil {
			return nil, "", err
		}
		return l, l.Addr().String(), nil
	}
	return nil, "", fmt.Errorf("unknown address %q (unix:PATH, unix-abstract:NAME, tcp:HOST:PORT)", address)
}

// tlsCredentials builds the server's TLS credentials from PEM files. A client CA turns on
// mutual TLS: the handshake fails unless the client presents a certificate that CA signed.
func tlsCredentials(certFile, keyFile, clientCAFile string) (credentials.TransportCredentials, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	config := &tls.Config{Certificates: []tls.Certificate{pair}}
	if clientCAFile != "" {
		pem, err := ioutil.ReadFile(clientCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("no certificate in " + clientCAFile)
		}
		config.ClientCAs = pool
		config.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(config), nil
}

func main() {
	var addresses listenFlags
	flag.Var(&addresses, "listen", "address to serve on (repeatable)")
	stopOnEOF := flag.Bool("stop-on-stdin-eof", false, "stop when standard input closes")
	plain := flag.Bool("plain", false,
		"grpc-go's default options only (the benchmarks): responses never compressed")
	certFile := flag.String("tls_cert", "", "serve TLS with this PEM certificate chain")
	keyFile := flag.String("tls_key", "", "the PEM private key of -tls_cert")
	clientCA := flag.String("client_ca", "", "require client certificates signed by this PEM CA")
	addons := flag.Bool("addons", false, "also serve grpc-go's health service ("+
		"grpc.testing.TestService SERVING, grpc.testing.NotServing NOT_SERVING) and its server "+
		"reflection (v1alpha)")
	flag.StringVar(&serverID, "server_id", serverID, "what fill_server_id answers")
	flag.Parse()
	if len(addresses) == 0 {
		fmt.Fprintln(os.Stderr, "interop_server: at least one -listen address is needed")
		os.Exit(2)
	}
	wire.RegisterRawCodec()
	wire.RegisterDeflate()
	options := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(math.MaxInt32),
		grpc.MaxSendMsgSize(math.MaxInt32),
	}
	if (*certFile == "") != (*keyFile == "") || (*clientCA != "" && *certFile == "") {
		fmt.Fprintln(os.Stderr, "interop_server: -tls_cert and -tls_key go together; -client_ca needs them")
		os.Exit(2)
	}
	if *certFile != "" {
		creds, err := tlsCredentials(*certFile, *keyFile, *clientCA)
		if err != nil {
			fmt.Fprintf(os.Stderr, "interop_server: TLS: %v\n", err)
			os.Exit(1)
		}
		options = append(options, grpc.Creds(creds))
	}
	if !*plain {
		options = append(options, grpc.RPCCompressor(selectiveGzip{}), grpc.StatsHandler(forgetAtEnd{}))
	}
	server := grpc.NewServer(options...)
	testpb.RegisterTestServiceServer(server, &testServer{})
	server.RegisterService(&echoService, struct{}{})
	if *addons {
		healthServer := health.NewServer()
		healthServer.SetServingStatus("grpc.testing.TestService", healthpb.HealthCheckResponse_SERVING)
		healthServer.SetServingStatus("grpc.testing.NotServing", healthpb.HealthCheckResponse_NOT_SERVING)
		healthpb.RegisterHealthServer(server, healthServer)
		reflection.Register(server)
	}

	out := bufio.NewWriter(os.Stdout)
	var listeners []net.Listener
	for _, address := range addresses {
		l, target, err := listen(address)
		if err != nil {
			fmt.Fprintf(os.Stderr, "interop_server: %v\n", err)
			os.Exit(1)
		}
		listeners = append(listeners, l)
		fmt.Fprintf(out, "READY %s\n", target)
	}
	done := make(chan error, len(listeners))
	for _, l := range listeners {
		go func(l net.Listener) { done <- server.Serve(l) }(l)
	}
	out.Flush()
	if *stopOnEOF {
		go func() {
			_, _ = io.Copy(ioutil.Discard, os.Stdin)
			server.Stop()
		}()
	}
	if err := <-done; err != nil && err != grpc.ErrServerStopped {
		fmt.Fprintf(os.Stderr, "interop_server: %v\n", err)
		os.Exit(1)
	}
}
