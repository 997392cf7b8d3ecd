package kwokrig

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/workflow"
)

func TestDecodeRecord(t *testing.T) {
	req := &workflow.RecordRequest{Events: []*workflow.ActionEvent{{}, {}, {}}}
	pb, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	_ = zw.Close()
	for _, c := range []struct {
		name string
		h    http.Header
		body []byte
	}{
		{"proto", http.Header{"Content-Type": {"application/proto"}}, pb},
		{"json", http.Header{"Content-Type": {"application/json"}}, js},
		{"gzip", http.Header{"Content-Type": {"application/proto"}, "Content-Encoding": {"gzip"}}, gz.Bytes()},
	} {
		if evs, err := DecodeRecord(c.h, c.body); err != nil || len(evs) != 3 {
			t.Errorf("%s: %d events, %v", c.name, len(evs), err)
		}
	}
	if _, err := DecodeRecord(http.Header{"Content-Type": {"text/plain"}}, pb); err == nil {
		t.Error("decoded an unknown content type")
	}
}
