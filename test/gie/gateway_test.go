//go:build gie

package gie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// The endpoint picker protocol's names (docs/proposals/004-endpoint-picker-protocol
// in GIE's module).
const (
	// destinationKey is the picked endpoint's header and metadata key.
	destinationKey = "x-gateway-destination-endpoint"
	// servedKey is the metadata key naming the endpoint that served.
	servedKey = "x-gateway-destination-endpoint-served"
	// lbNamespace is the metadata namespace of both.
	lbNamespace = "envoy.lb"
)

// Gateway bounds: the picker and the routers are hostile until checked.
const (
	// requestTimeout bounds one request: the pick, the relay and the
	// response phase.
	requestTimeout = 30 * time.Second
	// maxPickerMessages bounds the picker's messages for one request's
	// request phase (a header response and the body's chunks).
	maxPickerMessages = 64
	// maxPickerBytes bounds the body the picker hands back.
	maxPickerBytes = 1 << 20
	// maxResponseBytes bounds one response read from a router.
	maxResponseBytes = 1 << 20
	// chunkBytes is the size of the reads a response is relayed in, each
	// one mirrored to the picker as a body chunk.
	chunkBytes = 4 << 10
	// maxDrainMessages bounds the picker's messages for one request's
	// response phase: at most one per chunk mirrored, the headers' and
	// the end's, with room to spare.
	maxDrainMessages = 2*maxResponseBytes/chunkBytes + 16
)

// Gateway errors.
var (
	errPickerRefused  = errors.New("gie: the picker answered with an immediate response")
	errNoDestination  = errors.New("gie: the picker named no destination")
	errDestinations   = errors.New("gie: the picker's header and metadata name different destinations")
	errPickerMessages = errors.New("gie: the picker sent too many messages")
	errPickerBody     = errors.New("gie: the picker's body is over its bound")
	errPickerMessage  = errors.New("gie: unexpected message from the picker")
	errResponseBytes  = errors.New("gie: response over its bound")
)

// gateway plays the gateway in front of the pool, as Envoy does with the
// picker as its external processor in full-duplex streamed mode: per
// request it sends the picker the request's headers and then its body,
// takes the endpoint the picker names, sends the request there itself,
// and mirrors the response's headers and body to the picker with the
// endpoint that served.
type gateway struct {
	conn   *grpc.ClientConn
	picker extprocv3.ExternalProcessorClient
	http   *http.Client
}

// newGateway dials the picker; the connection closes when the test ends.
func newGateway(t *testing.T) *gateway {
	t.Helper()
	conn, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(pickerGRPCPort)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &gateway{
		conn:   conn,
		picker: extprocv3.NewExternalProcessorClient(conn),
		http:   &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}},
	}
}

// exchange is one request's outcome as the gateway saw it.
type exchange struct {
	// endpoint is the picked ip:port; empty when the picker refused.
	endpoint string
	// pickerStatus is the picker's immediate response status, when it
	// refused.
	pickerStatus int
	// status is the router's status.
	status int
	// member is the router's X-Sluice-Member: the replica that served.
	member string
	// done is true when a stream ended with data: [DONE].
	done bool
	// elapsed runs from the pick's start to the response's end.
	elapsed time.Duration
}

// do sends one request through the picker: a POST of body to path with
// id as its x-request-id.
func (g *gateway) do(ctx context.Context, id, path string, body []byte) (exchange, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	stream, err := g.picker.Process(ctx)
	if err != nil {
		return exchange{}, err
	}
	headers := []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte(http.MethodPost)},
		{Key: ":path", RawValue: []byte(path)},
		{Key: ":scheme", RawValue: []byte("http")},
		{Key: ":authority", RawValue: []byte("gateway")},
		{Key: "content-type", RawValue: []byte("application/json")},
		{Key: "content-length", RawValue: []byte(strconv.Itoa(len(body)))},
		{Key: "x-request-id", RawValue: []byte(id)},
	}
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: headers}},
	}}); err != nil {
		return exchange{}, fmt.Errorf("request headers: %w", err)
	}
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true},
	}}); err != nil {
		return exchange{}, fmt.Errorf("request body: %w", err)
	}
	p, err := readPick(stream, body)
	if errors.Is(err, errPickerRefused) {
		return exchange{pickerStatus: p.refusal, elapsed: time.Since(start)}, nil
	}
	if err != nil {
		return exchange{}, err
	}

	// The response phase: the picker's answers are read by a goroutine of
	// this call while the response is relayed, so neither side's sends
	// wait on the other's reads.
	drained := make(chan error, 1)
	go func() { drained <- drain(stream) }()
	ex, relayErr := g.relay(ctx, stream, p, path)
	ex.elapsed = time.Since(start)
	closeErr := stream.CloseSend()
	if relayErr != nil {
		cancel() // Ends the stream, and with it the drain.
	}
	drainErr := <-drained
	return ex, errors.Join(relayErr, closeErr, drainErr)
}

// pick is the picker's answer to a request phase.
type pick struct {
	endpoint string
	headers  []*corev3.HeaderValueOption
	body     []byte
	refusal  int
}

// readPick reads the picker's answer to the request phase: a header
// response, whose header mutation and dynamic metadata name the endpoint,
// then the body's responses up to their end of stream; or an immediate
// response, a refusal. The body is the picker's when it mutated it, sent
// when it did not.
func readPick(stream extprocv3.ExternalProcessor_ProcessClient, sent []byte) (pick, error) {
	var p pick
	var body bytes.Buffer
	for range maxPickerMessages {
		resp, err := stream.Recv()
		if err != nil {
			return p, fmt.Errorf("picker: %w", err)
		}
		switch r := resp.GetResponse().(type) {
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			p.refusal = int(r.ImmediateResponse.GetStatus().GetCode())
			return p, errPickerRefused
		case *extprocv3.ProcessingResponse_RequestHeaders:
			p.headers = r.RequestHeaders.GetResponse().GetHeaderMutation().GetSetHeaders()
			if p.endpoint, err = destination(p.headers, resp.GetDynamicMetadata()); err != nil {
				return p, err
			}
		case *extprocv3.ProcessingResponse_RequestBody:
			streamed := r.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if streamed == nil {
				p.body = sent
				return p, nil
			}
			if body.Len()+len(streamed.GetBody()) > maxPickerBytes {
				return p, errPickerBody
			}
			body.Write(streamed.GetBody())
			if streamed.GetEndOfStream() {
				p.body = body.Bytes()
				return p, nil
			}
		default:
			return p, fmt.Errorf("%w: %T", errPickerMessage, r)
		}
	}
	return p, errPickerMessages
}

// destination takes the picked endpoint from the header mutation and the
// dynamic metadata as the protocol says: either may carry it, both must
// agree, and the first of a comma-separated list is the primary.
func destination(headers []*corev3.HeaderValueOption, meta *structpb.Struct) (string, error) {
	var fromHeader, fromMeta string
	for _, h := range headers {
		if strings.EqualFold(h.GetHeader().GetKey(), destinationKey) {
			fromHeader = headerValue(h.GetHeader())
		}
	}
	if ns := meta.GetFields()[lbNamespace].GetStructValue(); ns != nil {
		fromMeta = ns.GetFields()[destinationKey].GetStringValue()
	}
	switch {
	case fromHeader == "" && fromMeta == "":
		return "", errNoDestination
	case fromHeader != "" && fromMeta != "" && fromHeader != fromMeta:
		return "", fmt.Errorf("%w: %q and %q", errDestinations, fromHeader, fromMeta)
	}
	list := fromHeader
	if list == "" {
		list = fromMeta
	}
	for _, ep := range strings.Split(list, ",") {
		if ap, err := netip.ParseAddrPort(strings.TrimSpace(ep)); err == nil {
			return ap.String(), nil
		}
	}
	return "", fmt.Errorf("%w: no ip:port in %q", errNoDestination, list)
}

// headerValue is a header's value, raw or not.
func headerValue(h *corev3.HeaderValue) string {
	if len(h.GetRawValue()) > 0 {
		return string(h.GetRawValue())
	}
	return h.GetValue()
}

// relay sends the request to the picked endpoint with the picker's
// headers and body, reads the response in chunks, and mirrors its headers
// and each chunk to the picker, naming the endpoint that served.
func (g *gateway) relay(ctx context.Context, stream extprocv3.ExternalProcessor_ProcessClient, p pick, path string) (exchange, error) {
	ex := exchange{endpoint: p.endpoint}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.endpoint+path, bytes.NewReader(p.body))
	if err != nil {
		return ex, err
	}
	for _, h := range p.headers {
		k := h.GetHeader().GetKey()
		if strings.HasPrefix(k, ":") || strings.EqualFold(k, "content-length") || strings.EqualFold(k, "host") {
			continue // Pseudo-headers and framing are the transport's.
		}
		req.Header.Set(k, headerValue(h.GetHeader()))
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return ex, err
	}
	defer func() { _ = resp.Body.Close() }()
	ex.status, ex.member = resp.StatusCode, resp.Header.Get("X-Sluice-Member")
	served := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		lbNamespace: {Fields: map[string]*structpb.Value{servedKey: structpb.NewStringValue(p.endpoint)}},
	}}
	if err := stream.Send(&extprocv3.ProcessingRequest{
		MetadataContext: served,
		Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
				{Key: ":status", RawValue: []byte(strconv.Itoa(resp.StatusCode))},
				{Key: "content-type", RawValue: []byte(resp.Header.Get("Content-Type"))},
			}},
		}},
	}); err != nil {
		return ex, fmt.Errorf("response headers: %w", err)
	}
	var all bytes.Buffer
	buf := make([]byte, chunkBytes)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if all.Len()+n > maxResponseBytes {
				return ex, errResponseBytes
			}
			all.Write(buf[:n])
			if err := stream.Send(&extprocv3.ProcessingRequest{MetadataContext: served, Request: &extprocv3.ProcessingRequest_ResponseBody{
				ResponseBody: &extprocv3.HttpBody{Body: bytes.Clone(buf[:n])},
			}}); err != nil {
				return ex, fmt.Errorf("response body: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return ex, rerr
		}
	}
	if err := stream.Send(&extprocv3.ProcessingRequest{MetadataContext: served, Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{EndOfStream: true},
	}}); err != nil {
		return ex, fmt.Errorf("response end: %w", err)
	}
	ex.done = bytes.HasSuffix(bytes.TrimRight(all.Bytes(), "\n"), []byte("data: [DONE]"))
	return ex, nil
}

// drain reads the picker's answers to the response phase until it ends
// the stream.
func drain(stream extprocv3.ExternalProcessor_ProcessClient) error {
	for range maxDrainMessages {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("picker, response phase: %w", err)
		}
	}
	return errPickerMessages
}
