// Command peer is the Go side of @broker/ttrpc's interop tests, built against
// containerd/ttrpc as Debian packages it (golang-github-containerd-ttrpc-dev),
// offline, in GOPATH mode:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o peer main.go
//
// Usage:
//
//	peer serve <socket>  serve service broker.interop.Peer; prints READY, exits when stdin closes
//	peer call <socket>   read a JSON array of calls on stdin, run them concurrently,
//	                     print a JSON array of results in the same order
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/ttrpc"
	"github.com/golang/protobuf/ptypes/any"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
)

const service = "broker.interop.Peer"

// raw is a message whose encoding is its bytes, so either side can put any
// payload on the wire; gogo's proto.Marshal/Unmarshal defer to these methods.
type raw struct{ b []byte }

func (r *raw) Reset()                   { r.b = nil }
func (r *raw) String() string           { return fmt.Sprintf("raw(%d bytes)", len(r.b)) }
func (*raw) ProtoMessage()              {}
func (r *raw) Marshal() ([]byte, error) { return r.b, nil }
func (r *raw) Unmarshal(b []byte) error { r.b = append([]byte(nil), b...); return nil }

func payload(unmarshal func(interface{}) error) ([]byte, error) {
	var r raw
	if err := unmarshal(&r); err != nil {
		return nil, err
	}
	return r.b, nil
}

func methods() map[string]ttrpc.Method {
	return map[string]ttrpc.Method{
		"Echo": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			b, err := payload(unmarshal)
			if err != nil {
				return nil, err
			}
			return &raw{b}, nil
		},
		// Payload "<code>:<message>": fails with that status and one detail.
		"Fail": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			b, err := payload(unmarshal)
			if err != nil {
				return nil, err
			}
			parts := strings.SplitN(string(b), ":", 2)
			code, _ := strconv.Atoi(parts[0])
			msg := ""
			if len(parts) == 2 {
				msg = parts[1]
			}
			return nil, status.FromProto(&spb.Status{
				Code:    int32(code),
				Message: msg,
				Details: []*any.Any{{TypeUrl: "type.googleapis.com/broker.interop.Detail", Value: []byte("detail")}},
			}).Err()
		},
		"Plain": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			return nil, errors.New("plain failure")
		},
		// Returns the request metadata as JSON.
		"Metadata": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			md, _ := ttrpc.GetMetadata(ctx)
			if md == nil {
				md = ttrpc.MD{}
			}
			b, err := json.Marshal(md)
			if err != nil {
				return nil, err
			}
			return &raw{b}, nil
		},
		// Returns the time left before the call's deadline in nanoseconds, or "none".
		"Deadline": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			dl, ok := ctx.Deadline()
			if !ok {
				return &raw{[]byte("none")}, nil
			}
			return &raw{[]byte(strconv.FormatInt(time.Until(dl).Nanoseconds(), 10))}, nil
		},
		// Payload "<ms>": sleeps that long unless the call's context ends first.
		"Sleep": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			b, err := payload(unmarshal)
			if err != nil {
				return nil, err
			}
			ms, _ := strconv.Atoi(string(b))
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return &raw{b}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
		// Payload "<n>": answers n bytes (containerd/ttrpc 1.1.1 sends oversize responses as is).
		"Big": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			b, err := payload(unmarshal)
			if err != nil {
				return nil, err
			}
			n, _ := strconv.Atoi(string(b))
			return &raw{make([]byte, n)}, nil
		},
	}
}

func serve(path string) error {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	s, err := ttrpc.NewServer()
	if err != nil {
		return err
	}
	s.Register(service, methods())
	go func() {
		// The test owns our lifetime: stop when it closes our stdin.
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = s.Close()
		_ = os.Remove(path)
		os.Exit(0)
	}()
	fmt.Println("READY")
	if err := s.Serve(context.Background(), l); err != nil && !errors.Is(err, ttrpc.ErrServerClosed) {
		return err
	}
	return nil
}

type callSpec struct {
	Service  string              `json:"service"`
	Method   string              `json:"method"`
	Payload  []byte              `json:"payload"`
	Metadata map[string][]string `json:"metadata"`
	// TimeoutMs sets a context deadline (sent as timeout_nano, enforced locally too).
	TimeoutMs int64 `json:"timeout_ms"`
	// TimeoutNano, if set, overrides the timeout_nano on the wire without a local deadline,
	// so the server's own deadline handling is what ends the call.
	TimeoutNano int64 `json:"timeout_nano"`
}

type detail struct {
	TypeURL string `json:"type_url"`
	Value   []byte `json:"value"`
}

type callResult struct {
	Code    int32    `json:"code"`
	Message string   `json:"message"`
	Details []detail `json:"details"`
	Payload []byte   `json:"payload"`
	// Error is set for failures that carry no ttrpc status (closed connection, …).
	Error string `json:"error,omitempty"`
}

type overrideKey struct{}

func call(path string) error {
	var specs []callSpec
	if err := json.NewDecoder(os.Stdin).Decode(&specs); err != nil {
		return fmt.Errorf("reading calls: %w", err)
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	override := func(ctx context.Context, req *ttrpc.Request, resp *ttrpc.Response, info *ttrpc.UnaryClientInfo, invoker ttrpc.Invoker) error {
		if ns, ok := ctx.Value(overrideKey{}).(int64); ok {
			req.TimeoutNano = ns
		}
		return invoker(ctx, req, resp)
	}
	client := ttrpc.NewClient(conn, ttrpc.WithUnaryClientInterceptor(override))
	defer client.Close()

	results := make([]callResult, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Add(1)
		go func(i int, spec callSpec) {
			defer wg.Done()
			ctx := context.Background()
			if len(spec.Metadata) > 0 {
				md := ttrpc.MD{}
				for k, vs := range spec.Metadata {
					md.Append(k, vs...)
				}
				ctx = ttrpc.WithMetadata(ctx, md)
			}
			if spec.TimeoutMs > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(spec.TimeoutMs)*time.Millisecond)
				defer cancel()
			}
			if spec.TimeoutNano != 0 {
				ctx = context.WithValue(ctx, overrideKey{}, spec.TimeoutNano)
			}
			var resp raw
			err := client.Call(ctx, spec.Service, spec.Method, &raw{spec.Payload}, &resp)
			r := callResult{Payload: resp.b, Details: []detail{}}
			if err != nil {
				if st, ok := status.FromError(err); ok {
					r.Code = int32(st.Code())
					r.Message = st.Message()
					for _, d := range st.Proto().GetDetails() {
						r.Details = append(r.Details, detail{TypeURL: d.GetTypeUrl(), Value: d.GetValue()})
					}
				} else {
					r.Code = -1
					r.Error = err.Error()
				}
			}
			results[i] = r
		}(i, spec)
	}
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(results)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: peer serve|call <unix socket path>")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2])
	case "call":
		err = call(os.Args[2])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}
