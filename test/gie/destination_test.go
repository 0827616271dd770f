//go:build gie

package gie

import (
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestDestination holds the gateway's reading of the picker's answer to
// the endpoint picker protocol: the header or the metadata, equal when
// both are set, the first ip:port of a list.
func TestDestination(t *testing.T) {
	header := func(v string) []*corev3.HeaderValueOption {
		return []*corev3.HeaderValueOption{
			{Header: &corev3.HeaderValue{Key: "content-type", RawValue: []byte("application/json")}},
			{Header: &corev3.HeaderValue{Key: destinationKey, RawValue: []byte(v)}},
		}
	}
	meta := func(v string) *structpb.Struct {
		return &structpb.Struct{Fields: map[string]*structpb.Value{lbNamespace: structpb.NewStructValue(
			&structpb.Struct{Fields: map[string]*structpb.Value{destinationKey: structpb.NewStringValue(v)}})}}
	}
	for _, tc := range []struct {
		desc    string
		headers []*corev3.HeaderValueOption
		meta    *structpb.Struct
		want    string
		wantErr error
	}{
		{desc: "header only", headers: header("127.0.0.2:8000"), want: "127.0.0.2:8000"},
		{desc: "metadata only", meta: meta("127.0.0.3:8000"), want: "127.0.0.3:8000"},
		{desc: "both, equal", headers: header("127.0.0.2:8000"), meta: meta("127.0.0.2:8000"), want: "127.0.0.2:8000"},
		{desc: "a list: the first is the primary", headers: header("127.0.0.4:8000,127.0.0.2:8000"), want: "127.0.0.4:8000"},
		{desc: "a list: the first valid one", headers: header("pod-a,127.0.0.2:8000"), want: "127.0.0.2:8000"},
		{desc: "neither", wantErr: errNoDestination},
		{desc: "no ip:port", meta: meta("pod-a"), wantErr: errNoDestination},
		{desc: "both, different", headers: header("127.0.0.2:8000"), meta: meta("127.0.0.3:8000"), wantErr: errDestinations},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := destination(tc.headers, tc.meta)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Fatalf("destination = %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
