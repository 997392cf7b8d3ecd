package cache_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
)

func intLit(v int64) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: v}}}}}}
}

func strLit(v string) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: v}}}}}}
}

func lits(kv ...any) *core.LiteralMap {
	m := &core.LiteralMap{Literals: map[string]*core.Literal{}}
	for i := 0; i < len(kv); i += 2 {
		m.Literals[kv[i].(string)] = kv[i+1].(*core.Literal)
	}
	return m
}

func collection(ls ...*core.Literal) *core.Literal {
	return &core.Literal{Value: &core.Literal_Collection{Collection: &core.LiteralCollection{Literals: ls}}}
}

func withHash(l *core.Literal, h string) *core.Literal { l.Hash = h; return l }

// The expected values are the ones Flyte's own catalog tests pin for the same
// inputs, so these tests fail if the hash drifts from Flyte's.
func TestHashInputsMatchesFlyte(t *testing.T) {
	const oneTwo = "GQid5LjHbakcW68DS3P2jp80QLbiF0olFHF2hTh5bg8"
	const empty = "GKw-c0PwFokMUQ6T-TUmEWnZ4_VlQ2Qpgw-vCTT0-OQ"
	for _, tc := range []struct {
		name   string
		inputs *core.LiteralMap
		ignore []string
		want   string
	}{
		{"two integers", lits("1", intLit(1), "2", intLit(2)), nil, oneTwo},
		{"insertion order does not matter", lits("2", intLit(2), "1", intLit(1)), nil, oneTwo},
		{"an ignored input is left out", lits("2", intLit(2), "1", intLit(1), "3", intLit(3)), []string{"3"}, oneTwo},
		{"no inputs", nil, nil, empty},
		{"an empty map", &core.LiteralMap{}, nil, empty},
		{"every input ignored", lits("x", intLit(5)), []string{"x"}, empty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cache.HashInputs(tc.inputs, tc.ignore)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("HashInputs = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestHashTaskIdentityMatchesFlyteAndIgnoresVersion(t *testing.T) {
	const want = "+UmrGhEwHv3FesdpA4gliBluF3FUXz4tshmuOlw1FSk="
	for _, v := range []string{"0", "1", ""} {
		got, err := cache.HashTaskIdentity(&core.Identifier{Project: "project_1", Domain: "domain_1", Name: "name_1", Version: v, Org: "org_1"})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("version %q: hash %s, want %s", v, got, want)
		}
	}
	other, err := cache.HashTaskIdentity(&core.Identifier{Project: "project_1", Domain: "domain_1", Name: "name_2", Org: "org_1"})
	if err != nil {
		t.Fatal(err)
	}
	if other == want {
		t.Fatal("another task name hashes the same")
	}
}

func TestHashInputsUsesLiteralHashes(t *testing.T) {
	hashOf := func(m *core.LiteralMap) string {
		t.Helper()
		h, err := cache.HashInputs(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		name string
		a, b *core.LiteralMap
		same bool
	}{
		{"values with the same hash are the same input",
			lits("df", withHash(strLit("s3://a/one"), "h1")), lits("df", withHash(strLit("s3://b/two"), "h1")), true},
		{"values with different hashes differ",
			lits("df", withHash(strLit("s3://a"), "h1")), lits("df", withHash(strLit("s3://a"), "h2")), false},
		{"hashes count inside collections",
			lits("c", collection(withHash(strLit("x"), "h"), intLit(1))), lits("c", collection(withHash(strLit("y"), "h"), intLit(1))), true},
		{"other members of a collection still count",
			lits("c", collection(withHash(strLit("x"), "h"), intLit(1))), lits("c", collection(withHash(strLit("x"), "h"), intLit(2))), false},
		{"a different value is a different input", lits("n", intLit(1)), lits("n", intLit(2)), false},
		{"a different name is a different input", lits("n", intLit(1)), lits("m", intLit(1)), false},
		{"a string is not an integer", lits("n", intLit(1)), lits("n", strLit("1")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hashOf(tc.a) == hashOf(tc.b); got != tc.same {
				t.Fatalf("same hash = %v, want %v", got, tc.same)
			}
		})
	}
}

func intVar() *core.Variable {
	return &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}
}

func iface(inputs ...string) *core.TypedInterface {
	ti := &core.TypedInterface{Outputs: &core.VariableMap{Variables: []*core.VariableEntry{{Key: "o0", Value: intVar()}}}}
	if inputs != nil {
		ti.Inputs = &core.VariableMap{}
		for _, n := range inputs {
			ti.Inputs.Variables = append(ti.Inputs.Variables, &core.VariableEntry{Key: n, Value: intVar()})
		}
	}
	return ti
}

func TestComputeKey(t *testing.T) {
	task := &core.Identifier{ResourceType: core.ResourceType_TASK, Org: "org1", Project: "proj", Domain: "dev", Name: "wf.square", Version: "v1"}
	base := cache.KeyInput{Task: task, Interface: iface("n"), Inputs: lits("n", intLit(3)), Version: "cv1"}
	key := func(t *testing.T, in cache.KeyInput) cache.Key {
		t.Helper()
		k, err := cache.ComputeKey(in)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(t, base)
	if k0.Org != "org1" || k0.Project != "proj" || k0.Domain != "dev" {
		t.Fatalf("scope = %s/%s/%s, want the task's org1/proj/dev", k0.Org, k0.Project, k0.Domain)
	}
	if err := k0.Validate(); err != nil {
		t.Fatalf("a computed key fails validation: %v", err)
	}
	// <identity>-<in sig>-<out sig>-<inputs>-<version>
	idHash, _ := cache.HashTaskIdentity(task)
	sig, _ := cache.HashInterface(base.Interface)
	inHash, _ := cache.HashInputs(base.Inputs, nil)
	if want := idHash + "-" + sig + "-" + inHash + "-cv1"; k0.Key != want {
		t.Fatalf("key = %s, want %s", k0.Key, want)
	}
	if parts := strings.Split(sig, "-"); len(parts) != 2 || len(parts[0]) != 8 || len(parts[1]) != 8 {
		t.Fatalf("interface hash %q is not two 8-character parts", sig)
	}

	with := func(f func(*cache.KeyInput)) cache.KeyInput {
		in := base
		f(&in)
		return in
	}
	for _, tc := range []struct {
		name string
		in   cache.KeyInput
		same bool
	}{
		{"the same task and inputs", with(func(*cache.KeyInput) {}), true},
		{"another task version", with(func(in *cache.KeyInput) {
			id := proto.CloneOf(task)
			id.Version = "v2"
			in.Task = id
		}), true},
		{"other inputs", with(func(in *cache.KeyInput) { in.Inputs = lits("n", intLit(4)) }), false},
		{"another cache version", with(func(in *cache.KeyInput) { in.Version = "cv2" }), false},
		{"another task", with(func(in *cache.KeyInput) {
			id := proto.CloneOf(task)
			id.Name = "wf.cube"
			in.Task = id
		}), false},
		{"another interface", with(func(in *cache.KeyInput) { in.Interface = iface("n", "m") }), false},
		{"an ignored input that changed", with(func(in *cache.KeyInput) {
			in.Inputs = lits("n", intLit(3), "seed", intLit(9))
			in.IgnoreInputs = []string{"seed"}
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := key(t, tc.in) == k0; got != tc.same {
				t.Fatalf("same key = %v, want %v", got, tc.same)
			}
		})
	}

	t.Run("inputs are not read without an inputs map", func(t *testing.T) {
		a := key(t, cache.KeyInput{Task: task, Interface: iface(), Inputs: lits("n", intLit(1))})
		b := key(t, cache.KeyInput{Task: task, Interface: iface(), Inputs: nil})
		if a != b {
			t.Fatalf("%s != %s", a.Key, b.Key)
		}
	})
	t.Run("missing parts are errors", func(t *testing.T) {
		if _, err := cache.ComputeKey(cache.KeyInput{Interface: iface()}); err == nil {
			t.Error("no task identifier: no error")
		}
		if _, err := cache.ComputeKey(cache.KeyInput{Task: task}); err == nil {
			t.Error("no interface: no error")
		}
	})
}

// A field that neither the generated types nor Flyte's schema know is left
// out of the hash, as Flyte's encoder leaves out what its types do not know.
func TestHashInputsLeavesOutFieldsNoSchemaKnows(t *testing.T) {
	plain, err := cache.HashInputs(lits("n", intLit(3)), nil)
	if err != nil {
		t.Fatal(err)
	}
	lit := intLit(3)
	lit.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "future"))
	got, err := cache.HashInputs(lits("n", lit), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != plain {
		t.Fatalf("hash %s, want %s", got, plain)
	}
}
