// Command addons_client is grpc-go's health and reflection clients against a server under
// test: minigrpc's health servicer and server reflection, as grpcurl-style tools and grpc-go's
// own health checking meet them (gRPC's doc/health-checking.md and doc/server-reflection.md).
//
// It prints one line per step, so a test reads them in order and acts between them (it changes
// a status after "WATCH" and waits for the next line, never on a timer):
//
//	CHECK <service> <status or error code>     health Check, for each -check flag value
//	WATCH <status>                             each status Watch(-watch) receives, -changes+1 lines
//	SERVICES <name,name,...>                   reflection (v1alpha): list_services
//	METHODS <service> <method:input:output,...>  from the files of file_containing_symbol(service)
//	FILES <name,name,...>                      the files that answer carried, in order
//	MISSING <symbol> <error code>              file_containing_symbol of -missing
//	DONE
//
// The files of a reflection answer are checked the way a tool uses them: every import of
// every file must be among them, and every method's input and output types defined in them.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/golang/protobuf/proto"
	descpb "github.com/golang/protobuf/protoc-gen-go/descriptor"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"

	"mginterop/wire"
)

type names []string

func (n *names) String() string     { return strings.Join(*n, ",") }
func (n *names) Set(v string) error { *n = append(*n, v); return nil }

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "addons_client: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	target := flag.String("target", "", "server: unix:PATH, unix-abstract:NAME or HOST:PORT")
	var checks names
	flag.Var(&checks, "check", "a service to Check (repeatable)")
	watch := flag.String("watch", "", "a service to Watch")
	changes := flag.Int("changes", 0, "how many changes to wait for after Watch's first status")
	describe := flag.String("describe", "", "a service to describe through reflection")
	missing := flag.String("missing", "", "a symbol reflection must not find")
	flag.Parse()
	if *target == "" {
		fail("usage: addons_client -target T [-check S]... [-watch S -changes N] [-describe S]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, "passthrough:///"+*target, grpc.WithInsecure(),
		grpc.WithBlock(), grpc.WithContextDialer(wire.Dialer),
		grpc.WithAuthority(wire.Authority(*target)))
	if err != nil {
		fail("dial %s: %v", *target, err)
	}
	defer conn.Close()

	health := healthpb.NewHealthClient(conn)
	for _, service := range checks {
		response, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			fmt.Printf("CHECK %s %s\n", service, status.Code(err))
		} else {
			fmt.Printf("CHECK %s %s\n", service, response.Status)
		}
	}
	if *watch != "" {
		stream, err := health.Watch(ctx, &healthpb.HealthCheckRequest{Service: *watch})
		if err != nil {
			fail("watch: %v", err)
		}
		for i := 0; i <= *changes; i++ {
			response, err := stream.Recv()
			if err != nil {
				fail("watch: %v", err)
			}
			fmt.Printf("WATCH %s\n", response.Status)
		}
	}
	if *describe != "" {
		reflectOn(ctx, conn, *describe, *missing)
	}
	fmt.Println("DONE")
}

func reflectOn(ctx context.Context, conn *grpc.ClientConn, service, missing string) {
	stream, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		fail("reflection: %v", err)
	}
	ask := func(request *rpb.ServerReflectionRequest) *rpb.ServerReflectionResponse {
		if err := stream.Send(request); err != nil {
			fail("reflection send: %v", err)
		}
		response, err := stream.Recv()
		if err != nil {
			fail("reflection recv: %v", err)
		}
		return response
	}
	listed := ask(&rpb.ServerReflectionRequest{
		MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: ""}})
	var services []string
	for _, s := range listed.GetListServicesResponse().GetService() {
		services = append(services, s.Name)
	}
	fmt.Printf("SERVICES %s\n", strings.Join(services, ","))

	answer := ask(&rpb.ServerReflectionRequest{
		MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{
			FileContainingSymbol: service}})
	files := map[string]*descpb.FileDescriptorProto{}
	var order []string
	for _, raw := range answer.GetFileDescriptorResponse().GetFileDescriptorProto() {
		file := &descpb.FileDescriptorProto{}
		if err := proto.Unmarshal(raw, file); err != nil {
			fail("a file does not parse: %v", err)
		}
		files[file.GetName()] = file
		order = append(order, file.GetName())
	}
	messages := map[string]bool{}
	for _, file := range files {
		for _, dependency := range file.GetDependency() {
			if files[dependency] == nil {
				fail("%s imports %s, which was not sent", file.GetName(), dependency)
			}
		}
		collect(messages, "."+file.GetPackage(), file.GetMessageType())
	}
	var methods []string
	for _, file := range files {
		for _, s := range file.GetService() {
			if file.GetPackage()+"."+s.GetName() != service {
				continue
			}
			for _, m := range s.GetMethod() {
				for _, typ := range []string{m.GetInputType(), m.GetOutputType()} {
					if !messages[typ] {
						fail("%s.%s uses %s, defined in no file sent", service, m.GetName(), typ)
					}
				}
				methods = append(methods, m.GetName()+":"+m.GetInputType()+":"+m.GetOutputType())
			}
		}
	}
	sort.Strings(methods)
	fmt.Printf("METHODS %s %s\n", service, strings.Join(methods, ","))
	fmt.Printf("FILES %s\n", strings.Join(order, ","))
	if missing != "" {
		answer := ask(&rpb.ServerReflectionRequest{
			MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{
				FileContainingSymbol: missing}})
		fmt.Printf("MISSING %s %d\n", missing, answer.GetErrorResponse().GetErrorCode())
	}
	if err := stream.CloseSend(); err != nil {
		fail("reflection close: %v", err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		fail("reflection end: %v", err)
	}
}

// collect adds the full names (".pkg.Msg", ".pkg.Msg.Nested") of messages and their nested types.
func collect(into map[string]bool, scope string, messages []*descpb.DescriptorProto) {
	for _, m := range messages {
		name := scope + "." + m.GetName()
		into[name] = true
		collect(into, name, m.GetNestedType())
	}
}
