// Command antrea_cni is a Go CNI plugin shaped like Antrea's antrea-cni, the yardstick for
// dist/antrea's cold start (bench/coldstart.py) and a second opinion on its output
// (tests/cni/test_cni_go_plugin.py).
//
// containernetworking's skel reads the CNI environment and stdin, validates them and answers
// VERSION (CNI SPEC.md, "Section 2: Execution Protocol"); ADD, CHECK and DEL each become one
// unary call on grpc-go to the agent's Cni service over its unix socket (ANTREA_CNI_SOCKET, else
// /var/run/antrea/cni.sock), on a connection made for that call. A successful ADD prints the
// agent's result as it came; an error from the agent keeps its CNI code and message; a failed
// RPC is a "try again later" error (code 11) carrying grpc-go's error text, since the runtime
// retries those. That is all a node's runtime sees of the Go plugin, so it is all the timing
// compares.
package main

import (
	"context"
	"net"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	cnipb "mginterop/cnipb"
)

const defaultSocket = "/var/run/antrea/cni.sock"

// rpcTimeout bounds one call; the runtime has its own, longer, deadline for the whole plugin.
const rpcTimeout = 60 * time.Second

func socketPath() string {
	if path := os.Getenv("ANTREA_CNI_SOCKET"); path != "" {
		return path
	}
	return defaultSocket
}

func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var dialer net.Dialer
	return dialer.DialContext(ctx, "unix", path)
}

type method func(cnipb.CniClient, context.Context, *cnipb.CniCmdRequest, ...grpc.CallOption) (*cnipb.CniCmdResponse, error)

// call sends the skel's arguments to the agent and turns the answer into what the runtime reads.
func call(args *skel.CmdArgs, rpc method, printResult bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	conn, err := grpc.DialContext(ctx, "passthrough:///"+socketPath(), grpc.WithInsecure(),
		grpc.WithContextDialer(dialUnix))
	if err != nil {
		return &types.Error{Code: types.ErrTryAgainLater, Msg: err.Error()}
	}
	defer conn.Close()
	request := &cnipb.CniCmdRequest{CniArgs: &cnipb.CniCmdArgs{
		ContainerId:          args.ContainerID,
		Netns:                args.Netns,
		Ifname:               args.IfName,
		Args:                 args.Args,
		Path:                 args.Path,
		NetworkConfiguration: args.StdinData,
	}}
	response, err := rpc(cnipb.NewCniClient(conn), ctx, request)
	if err != nil {
		if _, isStatus := status.FromError(err); isStatus {
			return &types.Error{Code: types.ErrTryAgainLater, Msg: err.Error()}
		}
		return &types.Error{Code: types.ErrInternal, Msg: err.Error()}
	}
	if failure := response.GetError(); failure != nil {
		return &types.Error{Code: uint(failure.GetCode()), Msg: failure.GetMessage()}
	}
	if printResult {
		if _, err := os.Stdout.Write(response.GetCniResult()); err != nil {
			return &types.Error{Code: types.ErrIOFailure, Msg: err.Error()}
		}
	}
	return nil
}

func main() {
	skel.PluginMain(
		func(args *skel.CmdArgs) error { return call(args, cnipb.CniClient.CmdAdd, true) },
		func(args *skel.CmdArgs) error { return call(args, cnipb.CniClient.CmdCheck, false) },
		func(args *skel.CmdArgs) error { return call(args, cnipb.CniClient.CmdDel, false) },
		version.All, "antrea_cni: a Go CNI plugin on grpc-go, for comparison")
}
