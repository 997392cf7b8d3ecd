package cache

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"github.com/benlaurie/objecthash/go/objecthash"
	"github.com/golang/protobuf/jsonpb" //nolint:staticcheck // Flyte's hash is defined over this encoder's output
	"google.golang.org/protobuf/protoadapt"

	"github.com/taskaction/executor/gen/flyteidl2/core"
)

// The cache key is Flyte's executor's, so that the executor and Flyte's own
// executor find each other's entries at the same cache service:
//
//	<task identity hash>-<inputs signature hash>-<outputs signature hash>-<inputs hash>-<cache version>
//
// Every hash is an objecthash of the message's JSON form as golang/protobuf's
// jsonpb writes it (field JSON names, enums by name, 64-bit integers as
// strings, empty fields left out, map keys sorted by objecthash), in Flyte's
// schema (schema.go). The task identity is the identifier as the template has
// it, less its version (so a new task version still hits), in standard base64
// with padding; the signature hashes are of the interface's inputs and
// outputs variable maps (an absent or empty one as an empty map), each in
// URL-safe base64 without padding cut to 8 characters; the inputs hash is in
// URL-safe base64 without padding, of the inputs less the ignored variables,
// where a literal carrying a hash of its own counts by that hash alone. The
// cache version is appended as it is, empty included.

// signatureHashLen is how much of each interface hash goes into the key.
const signatureHashLen = 8

var jsonMarshaler = &jsonpb.Marshaler{}

// protoHash is the 32-byte objecthash of m's JSON form in Flyte's schema.
func protoHash(m protoadapt.MessageV2) ([32]byte, error) {
	full, err := inFlyteSchema(m)
	if err != nil {
		return [32]byte{}, fmt.Errorf("reading %T in Flyte's schema: %w", m, err)
	}
	js, err := jsonMarshaler.MarshalToString(protoadapt.MessageV1Of(full))
	if err != nil {
		return [32]byte{}, fmt.Errorf("encoding %T as JSON: %w", m, err)
	}
	return objecthash.CommonJSONHash(js)
}

// HashTaskIdentity hashes the task identifier without its version (standard
// base64, padded).
func HashTaskIdentity(id *core.Identifier) (string, error) {
	h, err := protoHash(&core.Identifier{
		ResourceType: id.GetResourceType(), Project: id.GetProject(), Domain: id.GetDomain(),
		Name: id.GetName(), Org: id.GetOrg(),
	})
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(h[:]), nil
}

// HashInterface hashes the inputs and the outputs of iface separately and
// joins the first 8 characters of each (URL-safe base64): "<in>-<out>".
func HashInterface(iface *core.TypedInterface) (string, error) {
	part := func(vm *core.VariableMap) (string, error) {
		if len(vm.GetVariables()) == 0 {
			vm = &core.VariableMap{}
		}
		h, err := protoHash(vm)
		if err != nil {
			return "", err
		}
		s := base64.RawURLEncoding.EncodeToString(h[:])
		return s[:min(len(s), signatureHashLen)], nil
	}
	in, err := part(iface.GetInputs())
	if err != nil {
		return "", err
	}
	out, err := part(iface.GetOutputs())
	if err != nil {
		return "", err
	}
	return in + "-" + out, nil
}

// HashInputs hashes inputs (URL-safe base64, unpadded), leaving out the
// variables in ignore. A literal with its own hash counts by that hash alone,
// at any depth of collections and maps.
func HashInputs(inputs *core.LiteralMap, ignore []string) (string, error) {
	kept := make(map[string]*core.Literal, len(inputs.GetLiterals()))
	for name, lit := range inputs.GetLiterals() {
		if !slices.Contains(ignore, name) {
			kept[name] = hashed(lit)
		}
	}
	h, err := protoHash(&core.LiteralMap{Literals: kept})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(h[:]), nil
}

// hashed is lit as the inputs hash sees it: a literal that carries a hash is
// only that hash; collections and maps are rebuilt from their hashed members
// (and lose their own metadata); anything else is itself.
func hashed(lit *core.Literal) *core.Literal {
	if lit.GetHash() != "" {
		return &core.Literal{Hash: lit.GetHash()}
	}
	if c := lit.GetCollection(); c != nil {
		members := make([]*core.Literal, 0, len(c.GetLiterals()))
		for _, m := range c.GetLiterals() {
			members = append(members, hashed(m))
		}
		return &core.Literal{Value: &core.Literal_Collection{Collection: &core.LiteralCollection{Literals: members}}}
	}
	if m := lit.GetMap(); m != nil {
		members := make(map[string]*core.Literal, len(m.GetLiterals()))
		for k, v := range m.GetLiterals() {
			members[k] = hashed(v)
		}
		return &core.Literal{Value: &core.Literal_Map{Map: &core.LiteralMap{Literals: members}}}
	}
	return lit
}

// KeyInput is what a cache key is computed from.
type KeyInput struct {
	// Task is the template's identifier; its org (empty included), project
	// and domain also scope the entry at the service.
	Task *core.Identifier
	// Interface is the template's interface.
	Interface *core.TypedInterface
	// Inputs are the task's inputs (the inputs file at spec.inputUri). They
	// are only read when the interface declares inputs; nil is no inputs.
	Inputs *core.LiteralMap
	// IgnoreInputs is the template's metadata.cache_ignore_input_vars.
	IgnoreInputs []string
	// Version is the cache version: the TaskAction's spec.cacheKey.
	Version string
}

// ComputeKey is Flyte's cache key of in, scoped by the task's org, project
// and domain. It is a pure function of in.
func ComputeKey(in KeyInput) (Key, error) {
	if in.Task == nil {
		return Key{}, errors.New("cache key: the task identifier is required")
	}
	if in.Interface == nil {
		return Key{}, errors.New("cache key: the task interface is required")
	}
	idHash, err := HashTaskIdentity(in.Task)
	if err != nil {
		return Key{}, fmt.Errorf("cache key: task identity: %w", err)
	}
	sigHash, err := HashInterface(in.Interface)
	if err != nil {
		return Key{}, fmt.Errorf("cache key: interface: %w", err)
	}
	inputs := in.Inputs
	if in.Interface.GetInputs() == nil {
		inputs = nil // Flyte reads the inputs only when the interface has an inputs map
	}
	inHash, err := HashInputs(inputs, in.IgnoreInputs)
	if err != nil {
		return Key{}, fmt.Errorf("cache key: inputs: %w", err)
	}
	return Key{
		Org: in.Task.GetOrg(), Project: in.Task.GetProject(), Domain: in.Task.GetDomain(),
		Key: fmt.Sprintf("%s-%s-%s-%s", idHash, sigHash, inHash, in.Version),
	}, nil
}
