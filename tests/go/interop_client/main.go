// Command interop_client is grpc-go running one interop case against a TestService server.
//
//	interop_client -target unix:/path/sock -case large_unary
//
// The cases are those of grpc's doc/interop-test-descriptions.md. It exits 0 when the case
// passed and 1 with the failure on stderr otherwise (2 for bad arguments). -unary-only limits
// the cases that mix unary and streaming calls (status_code_and_message, custom_metadata) to
// their unary half, for a server that has no streaming yet.
//
// With -ca FILE the channel uses TLS (credentials.NewTLS, ALPN h2) and trusts that PEM CA;
// -server_host_override NAME verifies the server's certificate against NAME instead of the
// target's host (and sends it as :authority, as grpc.ssl_target_name_override does), and
// -cert FILE -key FILE present a client certificate (mutual TLS). -tls12 caps the version at
// TLS 1.2, where a server refuses a missing client certificate inside the handshake rather
// than after it (TLS 1.3).
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/ioutil"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // client_compressed_unary sends gzip
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	testpb "mginterop/grpc_testing"
	"mginterop/wire"
)

const (
	echoInitialKey    = "x-grpc-test-echo-initial"
	echoTrailingKey   = "x-grpc-test-echo-trailing-bin"
	initialValue      = "test_initial_metadata_value"
	largeRequestSize  = 271828
	largeResponseSize = 314159
	specialMessage    = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"
)

var (
	trailingValue  = string([]byte{0xab, 0xab, 0xab})
	requestSizes   = []int{27182, 8, 1828, 45904}
	responseSizes  = []int{31415, 9, 2653, 58979}
	callTimeout    = 20 * time.Second
	unaryOnly      bool
	errCaseFailure = fmt.Errorf("case failed")
)

// failf is a case's failure: it carries a message; main prints it and exits 1.
func failf(format string, args ...interface{}) error {
	return fmt.Errorf("%w: %s", errCaseFailure, fmt.Sprintf(format, args...))
}

func ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

func payload(size int) *testpb.Payload {
	return &testpb.Payload{Type: testpb.PayloadType_COMPRESSABLE, Body: make([]byte, size)}
}

func checkBody(got []byte, size int) error {
	if len(got) != size {
		return failf("payload of %d bytes, want %d", len(got), size)
	}
	if !bytes.Equal(got, make([]byte, size)) {
		return failf("payload of %d bytes is not all zeros", size)
	}
	return nil
}

func wantCode(err error, code codes.Code, message *string) error {
	s, _ := status.FromError(err)
	if s.Code() != code {
		return failf("status %v (%q), want %v", s.Code(), s.Message(), code)
	}
	if message != nil && s.Message() != *message {
		return failf("status message %q, want %q", s.Message(), *message)
	}
	return nil
}

func largeRequest() *testpb.SimpleRequest {
	return &testpb.SimpleRequest{
		ResponseType: testpb.PayloadType_COMPRESSABLE,
		ResponseSize: largeResponseSize,
		Payload:      payload(largeRequestSize),
	}
}

// ---------------------------------------------------------------------------------------------
// Unary cases.

func emptyUnary(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	reply, err := c.EmptyCall(ctx, &testpb.Empty{})
	if err != nil {
		return failf("EmptyCall: %v", err)
	}
	if reply == nil {
		return failf("EmptyCall: no response")
	}
	return nil
}

func largeUnary(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	reply, err := c.UnaryCall(ctx, largeRequest())
	if err != nil {
		return failf("UnaryCall: %v", err)
	}
	return checkBody(reply.GetPayload().GetBody(), largeResponseSize)
}

func clientCompressedUnary(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	// 1. A probe: expect_compressed on an uncompressed request must be refused.
	probe := largeRequest()
	probe.ExpectCompressed = &testpb.BoolValue{Value: true}
	_, err := c.UnaryCall(ctx, probe)
	if e := wantCode(err, codes.InvalidArgument, nil); e != nil {
		return fmt.Errorf("uncompressed probe: %w", e)
	}
	// 2. The same request, compressed.
	reply, err := c.UnaryCall(ctx, probe, grpc.UseCompressor("gzip"))
	if err != nil {
		return failf("compressed request: %v", err)
	}
	if err := checkBody(reply.GetPayload().GetBody(), largeResponseSize); err != nil {
		return err
	}
	// 3. expect_compressed false, uncompressed.
	plain := largeRequest()
	plain.ExpectCompressed = &testpb.BoolValue{Value: false}
	reply, err = c.UnaryCall(ctx, plain)
	if err != nil {
		return failf("uncompressed request: %v", err)
	}
	return checkBody(reply.GetPayload().GetBody(), largeResponseSize)
}

func serverCompressedUnary(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	for _, compressed := range []bool{true, false} {
		request := largeRequest()
		request.ResponseCompressed = &testpb.BoolValue{Value: compressed}
		reply, err := c.UnaryCall(ctx, request)
		if err != nil {
			return failf("response_compressed=%v: %v", compressed, err)
		}
		if err := checkBody(reply.GetPayload().GetBody(), largeResponseSize); err != nil {
			return fmt.Errorf("response_compressed=%v: %w", compressed, err)
		}
	}
	return nil
}

func statusCases(c testpb.TestServiceClient, code int32, message string) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	echo := &testpb.EchoStatus{Code: code, Message: message}
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: echo})
	if e := wantCode(err, codes.Code(code), &message); e != nil {
		return fmt.Errorf("UnaryCall: %w", e)
	}
	if unaryOnly {
		return nil
	}
	stream, err := c.FullDuplexCall(ctx)
	if err != nil {
		return failf("FullDuplexCall: %v", err)
	}
	if err := stream.Send(&testpb.StreamingOutputCallRequest{ResponseStatus: echo}); err != nil {
		return failf("FullDuplexCall send: %v", err)
	}
	if err := stream.CloseSend(); err != nil {
		return failf("FullDuplexCall close: %v", err)
	}
	_, err = stream.Recv()
	if e := wantCode(err, codes.Code(code), &message); e != nil {
		return fmt.Errorf("FullDuplexCall: %w", e)
	}
	return nil
}

func statusCodeAndMessage(c testpb.TestServiceClient) error {
	return statusCases(c, 2, "test status message")
}

func specialStatusMessage(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	message := specialMessage
	request := &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: 2, Message: message}}
	_, err := c.UnaryCall(ctx, request)
	return wantCode(err, codes.Unknown, &message)
}

func checkEcho(header, trailer metadata.MD) error {
	if got := header.Get(echoInitialKey); len(got) != 1 || got[0] != initialValue {
		return failf("initial metadata %s=%q, want %q", echoInitialKey, got, initialValue)
	}
	if got := trailer.Get(echoTrailingKey); len(got) != 1 || got[0] != trailingValue {
		return failf("trailing metadata %s=%q, want %q", echoTrailingKey, got, trailingValue)
	}
	return nil
}

func customMetadata(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, echoInitialKey, initialValue,
		echoTrailingKey, trailingValue)
	var header, trailer metadata.MD
	reply, err := c.UnaryCall(ctx, largeRequest(), grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		return failf("UnaryCall: %v", err)
	}
	if err := checkBody(reply.GetPayload().GetBody(), largeResponseSize); err != nil {
		return err
	}
	if err := checkEcho(header, trailer); err != nil {
		return fmt.Errorf("UnaryCall: %w", err)
	}
	if unaryOnly {
		return nil
	}
	stream, err := c.FullDuplexCall(ctx)
	if err != nil {
		return failf("FullDuplexCall: %v", err)
	}
	request2 := &testpb.StreamingOutputCallRequest{
		ResponseParameters: []*testpb.ResponseParameters{{Size: largeResponseSize}},
		Payload:            payload(largeRequestSize),
	}
	if err := stream.Send(request2); err != nil {
		return failf("FullDuplexCall send: %v", err)
	}
	if _, err := stream.Recv(); err != nil {
		return failf("FullDuplexCall recv: %v", err)
	}
	if err := stream.CloseSend(); err != nil {
		return failf("FullDuplexCall close: %v", err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		return failf("FullDuplexCall: %v after the last response, want end of stream", err)
	}
	streamHeader, err := stream.Header()
	if err != nil {
		return failf("FullDuplexCall header: %v", err)
	}
	if err := checkEcho(streamHeader, stream.Trailer()); err != nil {
		return fmt.Errorf("FullDuplexCall: %w", err)
	}
	return nil
}

func unimplementedMethod(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	_, err := c.UnimplementedCall(ctx, &testpb.Empty{})
	return wantCode(err, codes.Unimplemented, nil)
}

// ---------------------------------------------------------------------------------------------
// Streaming cases.

func timeoutOnSleepingServer(c testpb.TestServiceClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	stream, err := c.FullDuplexCall(ctx)
	if err != nil {
		return wantCode(err, codes.DeadlineExceeded, nil)
	}
	request := &testpb.StreamingOutputCallRequest{Payload: payload(27182)}
	if err := stream.Send(request); err != nil && err != io.EOF {
		return wantCode(err, codes.DeadlineExceeded, nil)
	}
	_, err = stream.Recv()
	return wantCode(err, codes.DeadlineExceeded, nil)
}

func clientStreaming(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	stream, err := c.StreamingInputCall(ctx)
	if err != nil {
		return failf("StreamingInputCall: %v", err)
	}
	total := 0
	for _, size := range requestSizes {
		if err := stream.Send(&testpb.StreamingInputCallRequest{Payload: payload(size)}); err != nil {
			return failf("send: %v", err)
		}
		total += size
	}
	reply, err := stream.CloseAndRecv()
	if err != nil {
		return failf("CloseAndRecv: %v", err)
	}
	if int(reply.GetAggregatedPayloadSize()) != total {
		return failf("aggregated_payload_size %d, want %d", reply.GetAggregatedPayloadSize(), total)
	}
	return nil
}

func serverStreaming(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	request := &testpb.StreamingOutputCallRequest{ResponseType: testpb.PayloadType_COMPRESSABLE}
	for _, size := range responseSizes {
		request.ResponseParameters = append(request.ResponseParameters,
			&testpb.ResponseParameters{Size: int32(size)})
	}
	stream, err := c.StreamingOutputCall(ctx, request)
	if err != nil {
		return failf("StreamingOutputCall: %v", err)
	}
	for index, size := range responseSizes {
		reply, err := stream.Recv()
		if err != nil {
			return failf("response %d: %v", index, err)
		}
		if err := checkBody(reply.GetPayload().GetBody(), size); err != nil {
			return fmt.Errorf("response %d: %w", index, err)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		return failf("after %d responses: %v, want end of stream", len(responseSizes), err)
	}
	return nil
}

func pingPong(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	stream, err := c.FullDuplexCall(ctx)
	if err != nil {
		return failf("FullDuplexCall: %v", err)
	}
	for index, size := range responseSizes {
		request := &testpb.StreamingOutputCallRequest{
			ResponseParameters: []*testpb.ResponseParameters{{Size: int32(size)}},
			Payload:            payload(requestSizes[index]),
		}
		if err := stream.Send(request); err != nil {
			return failf("send %d: %v", index, err)
		}
		reply, err := stream.Recv()
		if err != nil {
			return failf("recv %d: %v", index, err)
		}
		if err := checkBody(reply.GetPayload().GetBody(), size); err != nil {
			return fmt.Errorf("response %d: %w", index, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		return failf("CloseSend: %v", err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		return failf("after the last response: %v, want end of stream", err)
	}
	return nil
}

func emptyStream(c testpb.TestServiceClient) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	stream, err := c.FullDuplexCall(ctx)
	if err != nil {
		return failf("FullDuplexCall: %v", err)
	}
	if err := stream.CloseSend(); err != nil {
		return failf("CloseSend: %v", err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		return failf("%v, want end of stream with no response", err)
	}
	return nil
}

func cancelAfterBegin(c testpb.TestServiceClient) error {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.StreamingInputCall(ctx)
	if err != nil {
		cancel()
		return failf("StreamingInputCall: %v", err)
	}
	cancel()
	// Wait for the answer without half-closing: CloseAndRecv would let the server answer OK
	// to an empty stream before grpc-go's client has acted on the cancellation (seen about
	// once in 150 runs), while with the stream open only the cancellation can end the call.
	err = stream.RecvMsg(new(testpb.StreamingInputCallResponse))
	return wantCode(err, codes.Canceled, nil)
}

func cancelAfterFirstResponse(c testpb.TestServiceClient) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.FullDuplexCall(ctx)
	if err != nil {
		return failf("FullDuplexCall: %v", err)
	}
	request := &testpb.StreamingOutputCallRequest{
		ResponseParameters: []*testpb.ResponseParameters{{Size: 31415}},
		Payload:            payload(27182),
	}
	if err := stream.Send(request); err != nil {
		return failf("send: %v", err)
	}
	reply, err := stream.Recv()
	if err != nil {
		return failf("recv: %v", err)
	}
	if err := checkBody(reply.GetPayload().GetBody(), 31415); err != nil {
		return err
	}
	cancel()
	_, err = stream.Recv()
	return wantCode(err, codes.Canceled, nil)
}

var cases = map[string]func(testpb.TestServiceClient) error{
	"empty_unary":                 emptyUnary,
	"large_unary":                 largeUnary,
	"client_compressed_unary":     clientCompressedUnary,
	"server_compressed_unary":     serverCompressedUnary,
	"status_code_and_message":     statusCodeAndMessage,
	"special_status_message":      specialStatusMessage,
	"custom_metadata":             customMetadata,
	"unimplemented_method":        unimplementedMethod,
	"timeout_on_sleeping_server":  timeoutOnSleepingServer,
	"client_streaming":            clientStreaming,
	"server_streaming":            serverStreaming,
	"ping_pong":                   pingPong,
	"empty_stream":                emptyStream,
	"cancel_after_begin":          cancelAfterBegin,
	"cancel_after_first_response": cancelAfterFirstResponse,
}

func caseNames() []string {
	var names []string
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// tlsOption is the dial option for a TLS channel to target. The name checked against the
// server's certificate is serverName when given, else the target's host ("localhost" for unix
// sockets). It is set in the tls.Config because grpc-go 1.33 would otherwise take it from the
// passthrough endpoint, which for a unix target is not a host name.
func tlsOption(target, caFile, serverName, certFile, keyFile string, tls12 bool) (grpc.DialOption, error) {
	pem, err := ioutil.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no certificate in " + caFile)
	}
	if serverName == "" {
		serverName = "localhost"
		if !strings.HasPrefix(target, "unix") {
			if host, _, err := net.SplitHostPort(target); err == nil {
				serverName = host
			}
		}
	}
	config := &tls.Config{RootCAs: pool, ServerName: serverName}
	if tls12 {
		config.MaxVersion = tls.VersionTLS12
	}
	if certFile != "" || keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(config)), nil
}

func main() {
	target := flag.String("target", "", "server: unix:PATH, unix-abstract:NAME or HOST:PORT")
	name := flag.String("case", "", "the interop case to run")
	list := flag.Bool("list", false, "print the case names and exit")
	flag.BoolVar(&unaryOnly, "unary-only", false, "mixed cases: only their unary half")
	caFile := flag.String("ca", "", "use TLS, trusting this PEM CA certificate")
	override := flag.String("server_host_override", "",
		"with -ca: the name the server's certificate must carry (and the :authority)")
	certFile := flag.String("cert", "", "with -ca: PEM client certificate chain (mutual TLS)")
	keyFile := flag.String("key", "", "with -ca: the PEM private key of -cert")
	tls12 := flag.Bool("tls12", false, "with -ca: TLS 1.2 at most")
	flag.Parse()
	if *list {
		for _, n := range caseNames() {
			fmt.Println(n)
		}
		return
	}
	run, ok := cases[*name]
	if !ok || *target == "" {
		fmt.Fprintf(os.Stderr, "usage: interop_client -target T -case C; cases: %v\n", caseNames())
		os.Exit(2)
	}
	wire.RegisterDeflate()
	security := grpc.WithInsecure()
	if *caFile != "" {
		option, err := tlsOption(*target, *caFile, *override, *certFile, *keyFile, *tls12)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: TLS: %v\n", *name, err)
			os.Exit(2)
		}
		security = option
	} else if *override != "" || *certFile != "" || *keyFile != "" || *tls12 {
		fmt.Fprintln(os.Stderr, "interop_client: -server_host_override, -cert, -key and -tls12 need -ca")
		os.Exit(2)
	}
	// With TLS, grpc-go sends the verified server name as :authority and ignores WithAuthority.
	conn, err := grpc.Dial("passthrough:///"+*target, security,
		grpc.WithContextDialer(wire.Dialer), grpc.WithAuthority(wire.Authority(*target)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: dial %s: %v\n", *name, *target, err)
		os.Exit(1)
	}
	defer conn.Close()
	if err := run(testpb.NewTestServiceClient(conn)); err != nil {
		fmt.Fprintf(os.Stderr, "%s FAILED: %v\n", *name, err)
		conn.Close()
		os.Exit(1)
	}
	fmt.Printf("%s passed\n", *name)
}
