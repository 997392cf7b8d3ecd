package kwokrig

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/workflow"
)

// DecodeRecord reads the events of a Connect unary EventsProxyService/Record
// request body (proto or JSON, maybe gzip), for the proxies that stand
// between the executor and its events service on the rig.
func DecodeRecord(h http.Header, body []byte) ([]*workflow.ActionEvent, error) {
	if h.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if body, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	var req workflow.RecordRequest
	ct := h.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/proto"):
		if err := proto.Unmarshal(body, &req); err != nil {
			return nil, err
		}
	case strings.HasPrefix(ct, "application/json"):
		if err := protojson.Unmarshal(body, &req); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("content type " + ct)
	}
	return req.GetEvents(), nil
}
