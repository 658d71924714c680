// Command agent is the Go side of @broker/agent-policy's interop tests and benchmark, built against
// containerd/ttrpc as Debian packages it (golang-github-containerd-ttrpc-dev), offline, in GOPATH mode:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o agent main.go
//
// Usage:
//
//	agent serve <unix socket>  a stand-in kata agent: grpc.AgentService and grpc.Health over ttrpc.
//	                           Prints READY, then one JSON line per call received; exits when stdin closes.
//	agent call <address>       a ttrpc client: reads a JSON array of calls on stdin, runs them
//	                           concurrently on one connection, prints a JSON array of results in order.
//	                           The address is unix:<path> or tcp:<host:port>.
//
// The stand-in answers every AgentService method with an empty message, except:
//   - ReadStdout/ReadStderr: ReadStreamResponse{data: "stand-in output\n"};
//   - GetMetrics: Metrics{metrics: JSON of the call's metadata and the time left before its deadline};
//   - FutureMethod: an extra method the gate does not know, answering "future".
//
// Metadata steers it: x-stand-in-sleep-ms delays the answer (ending early with the call's context);
// x-stand-in-fail "<code>:<message>" fails the call with that status and one detail.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// bytesMsg is a message whose encoding is exactly its bytes; the stand-in never needs to decode requests.
type bytesMsg struct{ b []byte }

func (m *bytesMsg) Reset()                   { m.b = nil }
func (m *bytesMsg) String() string           { return fmt.Sprintf("bytesMsg(%d)", len(m.b)) }
func (*bytesMsg) ProtoMessage()              {}
func (m *bytesMsg) Marshal() ([]byte, error) { return m.b, nil }
func (m *bytesMsg) Unmarshal(b []byte) error { m.b = append([]byte(nil), b...); return nil }

var agentMethods = []string{
	"CreateContainer", "StartContainer", "RemoveContainer", "ExecProcess", "SignalProcess", "WaitProcess",
	"UpdateContainer", "UpdateEphemeralMounts", "StatsContainer", "PauseContainer", "ResumeContainer",
	"RemoveStaleVirtiofsShareMounts", "GetDiagnosticData", "WriteStdin", "ReadStdout", "ReadStderr",
	"CloseStdin", "TtyWinResize", "UpdateInterface", "UpdateRoutes", "ListInterfaces", "ListRoutes",
	"AddARPNeighbors", "GetIPTables", "SetIPTables", "GetMetrics", "MemAgentMemcgSet", "MemAgentCompactSet",
	"CreateSandbox", "DestroySandbox", "OnlineCPUMem", "ReseedRandomDev", "GetGuestDetails",
	"MemHotplugByProbe", "SetGuestDateTime", "CopyFile", "GetOOMEvent", "AddSwap", "AddSwapPath",
	"GetVolumeStats", "ResizeVolume", "SetPolicy", "FutureMethod",
}

// lengthDelimited encodes field 1 as bytes/string.
func lengthDelimited(b []byte) []byte {
	out := []byte{0x0a}
	n := uint64(len(b))
	for n >= 0x80 {
		out = append(out, byte(n)|0x80)
		n >>= 7
	}
	out = append(out, byte(n))
	return append(out, b...)
}

var stdoutMu sync.Mutex

func report(v interface{}) {
	b, _ := json.Marshal(v)
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func handler(service, method string) ttrpc.Method {
	return func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
		var req bytesMsg
		if err := unmarshal(&req); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(req.b)
		report(map[string]interface{}{"call": "/" + service + "/" + method, "sha256": hex.EncodeToString(sum[:]), "len": len(req.b)})
		md, _ := ttrpc.GetMetadata(ctx)
		if v, ok := md.Get("x-stand-in-sleep-ms"); ok && len(v) > 0 {
			ms, _ := strconv.Atoi(v[0])
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if v, ok := md.Get("x-stand-in-fail"); ok && len(v) > 0 {
			parts := strings.SplitN(v[0], ":", 2)
			code, _ := strconv.Atoi(parts[0])
			msg := ""
			if len(parts) == 2 {
				msg = parts[1]
			}
			return nil, status.FromProto(&spb.Status{
				Code:    int32(code),
				Message: msg,
				Details: []*any.Any{{TypeUrl: "type.googleapis.com/stand.in.Detail", Value: []byte("detail")}},
			}).Err()
		}
		switch method {
		case "ReadStdout", "ReadStderr":
			return &bytesMsg{lengthDelimited([]byte("stand-in output\n"))}, nil
		case "GetMetrics":
			info := map[string]interface{}{"metadata": md}
			if dl, ok := ctx.Deadline(); ok {
				info["deadline_ns"] = time.Until(dl).Nanoseconds()
			}
			b, _ := json.Marshal(info)
			return &bytesMsg{lengthDelimited(b)}, nil
		case "FutureMethod":
			return &bytesMsg{[]byte("future")}, nil
		case "Check":
			return &bytesMsg{[]byte{0x08, 0x01}}, nil
		case "Version":
			return &bytesMsg{append(lengthDelimited([]byte("1.0")), 0x12, 0x08, 's', 't', 'a', 'n', 'd', '-', 'i', 'n')}, nil
		}
		return &bytesMsg{}, nil
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
	methods := map[string]ttrpc.Method{}
	for _, m := range agentMethods {
		methods[m] = handler("grpc.AgentService", m)
	}
	s.Register("grpc.AgentService", methods)
	s.Register("grpc.Health", map[string]ttrpc.Method{
		"Check":   handler("grpc.Health", "Check"),
		"Version": handler("grpc.Health", "Version"),
	})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = s.Close()
		_ = os.Remove(path)
		os.Exit(0)
	}()
	report(map[string]string{"ready": path})
	if err := s.Serve(context.Background(), l); err != nil && !errors.Is(err, ttrpc.ErrServerClosed) {
		return err
	}
	return nil
}

type callSpec struct {
	Service   string              `json:"service"`
	Method    string              `json:"method"`
	Payload   []byte              `json:"payload"`
	Metadata  map[string][]string `json:"metadata"`
	TimeoutMs int64               `json:"timeout_ms"`
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
	Error   string   `json:"error,omitempty"`
}

func dial(address string) (net.Conn, error) {
	switch {
	case strings.HasPrefix(address, "unix:"):
		return net.Dial("unix", strings.TrimPrefix(address, "unix:"))
	case strings.HasPrefix(address, "tcp:"):
		return net.Dial("tcp", strings.TrimPrefix(address, "tcp:"))
	}
	return nil, fmt.Errorf("address must be unix:<path> or tcp:<host:port>, got %q", address)
}

func call(address string) error {
	var specs []callSpec
	if err := json.NewDecoder(os.Stdin).Decode(&specs); err != nil {
		return fmt.Errorf("reading calls: %w", err)
	}
	conn, err := dial(address)
	if err != nil {
		return err
	}
	client := ttrpc.NewClient(conn)
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
			var resp bytesMsg
			err := client.Call(ctx, spec.Service, spec.Method, &bytesMsg{spec.Payload}, &resp)
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
		fmt.Fprintln(os.Stderr, "usage: agent serve <unix socket> | agent call <unix:path|tcp:host:port>")
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
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}
