// Package wire holds what minigrpc's Go peers share beyond the generated interop messages: a
// codec that passes raw bytes through (the benchmarks' /bench.Echo/Echo uses identity
// serializers, so grpc-go must not pay for protobuf where the Python peers do not), dialing
// minigrpc's target spellings, and the "deflate" message encoding minigrpc speaks.
package wire

import (
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"google.golang.org/grpc/encoding"
)

// Raw is a message that is its own wire form.
type Raw []byte

// rawOrProto is grpc-go's "proto" codec with one addition: *Raw values are sent and received
// as they are. Registered under the name "proto", it serves application/grpc requests.
type rawOrProto struct {
	proto encoding.Codec
}

func (c rawOrProto) Marshal(v interface{}) ([]byte, error) {
	if raw, ok := v.(*Raw); ok {
		return *raw, nil
	}
	return c.proto.Marshal(v)
}

func (c rawOrProto) Unmarshal(data []byte, v interface{}) error {
	if raw, ok := v.(*Raw); ok {
		// grpc-go hands every received message its own buffer, so keeping it is safe.
		*raw = data
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

func (rawOrProto) Name() string { return "proto" }

// RegisterRawCodec makes *Raw messages work on every call of this process.
func RegisterRawCodec() {
	encoding.RegisterCodec(rawOrProto{proto: encoding.GetCodec("proto")})
}

// deflate is the gRPC "deflate" message encoding: the zlib format of RFC 1950, as grpc-core
// and minigrpc use it. grpc-go registers only gzip.
type deflate struct{}

func (deflate) Name() string { return "deflate" }

func (deflate) Compress(w io.Writer) (io.WriteCloser, error) { return zlib.NewWriter(w), nil }

func (deflate) Decompress(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }

// RegisterDeflate lets this process receive (and, when asked, send) deflate messages.
func RegisterDeflate() {
	encoding.RegisterCompressor(deflate{})
}

// Dialer connects to one of minigrpc's target spellings: unix:PATH, unix:///PATH,
// unix-abstract:NAME, HOST:PORT. grpc-go 1.33 resolves none of the unix forms itself, so the
// channel is dialed as passthrough:///<target> with this dialer.
func Dialer(ctx context.Context, target string) (net.Conn, error) {
	var d net.Dialer
	switch {
	case strings.HasPrefix(target, "unix-abstract:"):
		return d.DialContext(ctx, "unix", "@"+strings.TrimPrefix(target, "unix-abstract:"))
	case strings.HasPrefix(target, "unix://"):
		return d.DialContext(ctx, "unix", strings.TrimPrefix(target, "unix://"))
	case strings.HasPrefix(target, "unix:"):
		return d.DialContext(ctx, "unix", strings.TrimPrefix(target, "unix:"))
	case strings.Contains(target, "://"):
		return nil, fmt.Errorf("unsupported target %q", target)
	}
	return d.DialContext(ctx, "tcp", target)
}

// Authority is the :authority a client sends for target: "localhost" for unix sockets (as
// grpc-core does), the host:port otherwise.
func Authority(target string) string {
	if strings.HasPrefix(target, "unix") {
		return "localhost"
	}
	return target
}
