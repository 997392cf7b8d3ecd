package cache_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
)

// Golden cache keys computed by Flyte's own code, flyteorg/flyte at
// 6fadb90d65af26f4db908ec1c5f5af546a3e4299 (the commit docs/flyte-compat.md
// follows). A throwaway program, built outside this repository against that
// checkout and never committed, parsed each case's template and inputs (the
// text below, byte for byte) into Flyte's generated types; built catalog.Key
// as executor/pkg/controller/taskaction_cache.go builds it (the template's
// identifier cloned as it is, the cache version, the template's
// metadata.cache_ignore_input_vars, the template's interface, a reader of the
// inputs); called Get and GetOrExtendReservation of
// flyteplugins/.../catalog/cache_service.Client on a stub CacheService; and
// printed the key and the identifier of the requests it received, whether it
// read the inputs, and the SHA-256 of the deterministic wire form of the
// template and the inputs it parsed. The strings below are what it printed.
// The SHA-256 check proves that this test hashes the very messages Flyte's
// code did.

// goldenVersion is a cache version (spec.cacheKey) of the form Flyte's runs
// service writes: standard base64 of a SHA-256, with '+', '/' and '='.
const goldenVersion = "ZmxvdGUtY2FjaGUtdmVyc2lvbi1mb3ItdGhlLXRlc3Q+/w=="

const goldenIfaceN = `interface {
  inputs { variables { key: "n" value { type { simple: INTEGER } } } }
  outputs { variables { key: "o0" value { type { simple: INTEGER } } } }
}`

// goldenTemplate is a discoverable python task wf.square of
// flytesnacks/development; idExtra goes before the project in its identifier,
// meta after the metadata's discovery version.
func goldenTemplate(idExtra, meta, iface, version string) string {
	return fmt.Sprintf("id { resource_type: TASK %sproject: \"flytesnacks\" domain: \"development\" name: \"wf.square\" version: \"%s\" }\n"+
		"type: \"python\"\n"+
		"metadata { discoverable: true discovery_version: \"1\"%s }\n%s", idExtra, version, meta, iface)
}

const goldenN3 = `literals { key: "n" value { scalar { primitive { integer: 3 } } } }`

const goldenIfaceSeed = `interface {
  inputs {
    variables { key: "n" value { type { simple: INTEGER } } }
    variables { key: "seed" value { type { simple: INTEGER } } }
  }
  outputs { variables { key: "o0" value { type { simple: INTEGER } } } }
}`

const goldenIfaceOutputsOnly = `interface {
  outputs { variables { key: "o0" value { type { simple: STRING } } } }
}`

const goldenIfaceEmptyInputs = `interface {
  inputs { }
  outputs { variables { key: "o0" value { type { simple: STRING } } } }
}`

const goldenIfaceKinds = `interface {
  inputs {
    variables { key: "i" value { type { simple: INTEGER } description: "an integer" } }
    variables { key: "f" value { type { simple: FLOAT } } }
    variables { key: "s" value { type { simple: STRING } } }
    variables { key: "b" value { type { simple: BOOLEAN } } }
    variables { key: "dt" value { type { simple: DATETIME } } }
    variables { key: "d" value { type { simple: DURATION } } }
    variables { key: "blob" value { type { blob { format: "csv" dimensionality: MULTIPART } } } }
    variables { key: "bin" value { type { simple: BINARY } } }
    variables { key: "gen" value { type { simple: STRUCT metadata { fields { key: "title" value { string_value: "Point" } } } } } }
    variables { key: "none" value { type { simple: NONE } } }
    variables { key: "sd" value { type { structured_dataset_type { format: "parquet" columns { name: "a" literal_type { simple: INTEGER } } } } } }
    variables { key: "u" value { type { union_type { variants { simple: INTEGER structure { tag: "int" } } variants { simple: STRING structure { tag: "str" } } } } } }
    variables { key: "err" value { type { simple: ERROR } } }
    variables { key: "sch" value { type { schema { columns { name: "c" type: FLOAT } } } } }
    variables { key: "off" value { type { collection_type { simple: INTEGER } } } }
  }
  outputs { variables { key: "o0" value { type { map_value_type { collection_type { simple: STRING } } } } } }
}`

// Every scalar kind, an integer beyond float64's precision, a string that
// needs escaping, bytes, a Struct with numbers JSON writes in exponent form,
// and an offloaded literal.
const goldenKinds = `literals { key: "i" value { scalar { primitive { integer: -9007199254740993 } } } }
literals { key: "f" value { scalar { primitive { float_value: 2.5 } } } }
literals { key: "s" value { scalar { primitive { string_value: "héllo \"world\"\n" } } } }
literals { key: "b" value { scalar { primitive { boolean: true } } } }
literals { key: "dt" value { scalar { primitive { datetime { seconds: 1700000000 nanos: 123000000 } } } } }
literals { key: "d" value { scalar { primitive { duration { seconds: 90 nanos: 500 } } } } }
literals { key: "blob" value { scalar { blob { metadata { type { format: "csv" dimensionality: MULTIPART } } uri: "s3://bucket/data/" } } } }
literals { key: "bin" value { scalar { binary { value: "\x81\xa1a\x01" tag: "msgpack" } } } }
literals { key: "gen" value { scalar { generic { fields { key: "x" value { number_value: 1 } } fields { key: "y" value { number_value: 0.1 } } fields { key: "tags" value { list_value { values { string_value: "a" } values { bool_value: false } values { null_value: NULL_VALUE } } } } fields { key: "nested" value { struct_value { fields { key: "z" value { number_value: -3e+21 } } } } } } } } }
literals { key: "none" value { scalar { none_type { } } } }
literals { key: "sd" value { scalar { structured_dataset { uri: "s3://bucket/df.parquet" metadata { structured_dataset_type { format: "parquet" columns { name: "a" literal_type { simple: INTEGER } } } } } } } }
literals { key: "u" value { scalar { union { value { scalar { primitive { string_value: "s" } } } type { simple: STRING structure { tag: "str" } } } } } }
literals { key: "err" value { scalar { error { failed_node_id: "n0" message: "boom" } } } }
literals { key: "sch" value { scalar { schema { uri: "s3://bucket/schema" type { columns { name: "c" type: FLOAT } } } } } }
literals { key: "off" value { offloaded_metadata { uri: "s3://bucket/offloaded.pb" size_bytes: 1048576 inferred_type { collection_type { simple: INTEGER } } } } }`

const goldenIfaceNested = `interface {
  inputs {
    variables { key: "c" value { type { collection_type { map_value_type { collection_type { simple: INTEGER } } } } } }
    variables { key: "m" value { type { map_value_type { map_value_type { simple: STRING } } } } }
  }
  outputs { }
}`

const goldenNested = `literals { key: "c" value { collection {
  literals { map { literals { key: "a" value { collection { literals { scalar { primitive { integer: 1 } } } literals { scalar { primitive { integer: 2 } } } } } } literals { key: "b" value { collection { } } } } }
  literals { map { } }
} } }
literals { key: "m" value { map {
  literals { key: "outer" value { map { literals { key: "inner" value { scalar { primitive { string_value: "x" } } } } } } }
  literals { key: "empty" value { map { } } }
} } }`

const goldenIfaceMeta = `interface {
  inputs {
    variables { key: "s" value { type { simple: STRING } } }
    variables { key: "c" value { type { collection_type { simple: INTEGER } } } }
  }
  outputs { variables { key: "o0" value { type { simple: STRING } } } }
}`

// goldenMetaInputs: a scalar and a collection, with the given literal
// metadata on each; the collection's member always has metadata of its own.
func goldenMetaInputs(scalarMeta, collMeta string) string {
	return fmt.Sprintf("literals { key: \"s\" value { scalar { primitive { string_value: \"v\" } } %s } }\n"+
		"literals { key: \"c\" value { collection { literals { scalar { primitive { integer: 1 } } metadata { key: \"m\" value: \"inner\" } } } %s } }",
		scalarMeta, collMeta)
}

const goldenIfaceHash = `interface {
  inputs {
    variables { key: "df" value { type { structured_dataset_type { format: "parquet" } } } }
    variables { key: "dfs" value { type { map_value_type { collection_type { structured_dataset_type { } } } } } }
  }
  outputs { variables { key: "o0" value { type { simple: INTEGER } } } }
}`

// goldenHashInputs: a literal with a hash (and meta) at the top, and one
// inside a collection inside a map.
func goldenHashInputs(uri1, uri2, meta string) string {
	return fmt.Sprintf("literals { key: \"df\" value { scalar { structured_dataset { uri: \"%s\" } } hash: \"df-hash-1\" %s } }\n"+
		"literals { key: \"dfs\" value { map { literals { key: \"k\" value { collection {\n"+
		"  literals { scalar { structured_dataset { uri: \"%s\" } } hash: \"inner-hash\" }\n"+
		"  literals { scalar { primitive { integer: 7 } } }\n"+
		"} } } } } }", uri1, meta, uri2)
}

// Flyte's keys, as its program printed them.
const (
	goldenIDNoOrg   = "t/u6UXWC1D6rbxdwbcM4VJq6C7ToarKCYg9RhUcm+WQ="
	goldenIDAcme    = "AX7forb2B5u03ms6KDj+P190j+AXtz0WNMW/fbyBIUQ="
	goldenKeyN3     = goldenIDNoOrg + "-WNyXrUZC-J2qAfV9C-vvL3cM1mzryVioHUaWRlm03TAw_yBloq986VtCEq33M-" + goldenVersion
	goldenKeyEmptyI = goldenIDNoOrg + "-GKw-c0Pw-GKw-c0Pw-GKw-c0PwFokMUQ6T-TUmEWnZ4_VlQ2Qpgw-vCTT0-OQ-" + goldenVersion
)

type goldenCase struct {
	name              string
	template, inputs  string
	version           string
	wantKey           string
	wantOrg, wantProj string
	// wantRead: Flyte's code read the inputs.
	wantRead bool
	// SHA-256 (first 8 bytes, hex) of the deterministic wire form of the
	// template and the inputs that Flyte's program parsed.
	templateSum, inputsSum string
	// flyteNoKey: Flyte's code computed no key (wantKey is then ours).
	flyteNoKey string
}

var goldenCases = []goldenCase{
	{name: "no org: the identity hashes no org, the scope has none",
		template: goldenTemplate("", "", goldenIfaceN, "abc123"), inputs: goldenN3, version: goldenVersion,
		wantKey: goldenKeyN3, wantOrg: "", wantProj: "flytesnacks", wantRead: true,
		templateSum: "67dae48f4d74177e", inputsSum: "d45b3695ab561e4e"},
	{name: "an org: in the identity hash and in the scope",
		template: goldenTemplate(`org: "acme" `, "", goldenIfaceN, "abc123"), inputs: goldenN3, version: goldenVersion,
		wantKey: goldenIDAcme + "-WNyXrUZC-J2qAfV9C-vvL3cM1mzryVioHUaWRlm03TAw_yBloq986VtCEq33M-" + goldenVersion,
		wantOrg: "acme", wantProj: "flytesnacks", wantRead: true,
		templateSum: "83f7cb41c078fce2", inputsSum: "d45b3695ab561e4e"},
	{name: "another task version: the same key",
		template: goldenTemplate("", "", goldenIfaceN, "def456"), inputs: goldenN3, version: goldenVersion,
		wantKey: goldenKeyN3, wantProj: "flytesnacks", wantRead: true,
		templateSum: "beaf24ac2eb65fa4", inputsSum: "d45b3695ab561e4e"},
	{name: "another project",
		template: strings.Replace(goldenTemplate("", "", goldenIfaceN, "abc123"), `"flytesnacks"`, `"other"`, 1), inputs: goldenN3, version: goldenVersion,
		wantKey:  "hMG1Fl04UTJTdToEFGc6rQoBD2s9QjYmzT1I5CFvgKw=-WNyXrUZC-J2qAfV9C-vvL3cM1mzryVioHUaWRlm03TAw_yBloq986VtCEq33M-" + goldenVersion,
		wantProj: "other", wantRead: true,
		templateSum: "f5e998a843ecfb1f", inputsSum: "d45b3695ab561e4e"},
	{name: "other inputs",
		template: goldenTemplate("", "", goldenIfaceN, "abc123"), inputs: strings.Replace(goldenN3, "integer: 3", "integer: 4", 1), version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-WNyXrUZC-J2qAfV9C-U4EIKXodwqIQJE3KJTQ3Vu2BB0q9QMR5dUt8DSEXQ1M-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "67dae48f4d74177e", inputsSum: "460cc24765e5bb10"},
	{name: "an empty cache version ends the key with its separator",
		template: goldenTemplate("", "", goldenIfaceN, "abc123"), inputs: goldenN3, version: "",
		wantKey:  goldenIDNoOrg + "-WNyXrUZC-J2qAfV9C-vvL3cM1mzryVioHUaWRlm03TAw_yBloq986VtCEq33M-",
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "67dae48f4d74177e", inputsSum: "d45b3695ab561e4e"},
	{name: "an ignored input is left out",
		template: goldenTemplate("", ` cache_ignore_input_vars: "seed" cache_ignore_input_vars: "unused"`, goldenIfaceSeed, "abc123"),
		inputs:   goldenN3 + "\n" + `literals { key: "seed" value { scalar { primitive { integer: 42 } } } }`, version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-s6upBQzo-J2qAfV9C-vvL3cM1mzryVioHUaWRlm03TAw_yBloq986VtCEq33M-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "2a37a2f382903bbc", inputsSum: "21bda50badb340b1"},
	{name: "an ignored input with another value: the same key",
		template: goldenTemplate("", ` cache_ignore_input_vars: "seed" cache_ignore_input_vars: "unused"`, goldenIfaceSeed, "abc123"),
		inputs:   goldenN3 + "\n" + `literals { key: "seed" value { scalar { primitive { integer: 7 } } } }`, version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-s6upBQzo-J2qAfV9C-vvL3cM1mzryVioHUaWRlm03TAw_yBloq986VtCEq33M-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "2a37a2f382903bbc", inputsSum: "ebc4cd8540bf3736"},
	{name: "an empty interface: no inputs read",
		template: goldenTemplate("", "", "interface { }", "abc123"), inputs: goldenN3, version: goldenVersion,
		wantKey: goldenKeyEmptyI, wantProj: "flytesnacks",
		templateSum: "c717c8ea839f7774", inputsSum: "d45b3695ab561e4e"},
	{name: "no interface: keyed as an empty one",
		template: goldenTemplate("", "", "", "abc123"), inputs: goldenN3, version: goldenVersion,
		wantKey: goldenKeyEmptyI, wantProj: "flytesnacks",
		templateSum: "bd43e61dfb1c4b4e", inputsSum: "d45b3695ab561e4e",
		flyteNoKey: "catalog key typed interface is required"},
	{name: "no inputs declared: no inputs read",
		template: goldenTemplate("", "", goldenIfaceOutputsOnly, "abc123"), inputs: goldenN3, version: goldenVersion,
		wantKey:     goldenIDNoOrg + "-GKw-c0Pw-1iqK0awh-GKw-c0PwFokMUQ6T-TUmEWnZ4_VlQ2Qpgw-vCTT0-OQ-" + goldenVersion,
		wantProj:    "flytesnacks",
		templateSum: "44bd24b870a1723d", inputsSum: "d45b3695ab561e4e"},
	{name: "an empty inputs map declared: the inputs are read and hashed",
		template: goldenTemplate("", "", goldenIfaceEmptyInputs, "abc123"),
		inputs:   `literals { key: "x" value { scalar { primitive { integer: 1 } } } }`, version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-GKw-c0Pw-1iqK0awh-jJYYHCdEwO0EGAAzKJSnDfiTqN-1FWTIAIffcpVodss-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "63324c27c5ca4450", inputsSum: "1c73cef2a5730634"},
	{name: "an empty inputs map declared, no inputs",
		template: goldenTemplate("", "", goldenIfaceEmptyInputs, "abc123"), inputs: "", version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-GKw-c0Pw-1iqK0awh-GKw-c0PwFokMUQ6T-TUmEWnZ4_VlQ2Qpgw-vCTT0-OQ-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "63324c27c5ca4450", inputsSum: "e3b0c44298fc1c14"},
	{name: "every literal kind",
		template: goldenTemplate(`org: "acme" `, "", goldenIfaceKinds, "abc123"), inputs: goldenKinds, version: goldenVersion,
		wantKey: goldenIDAcme + "-q4EhQjS8-rF3BawxP-aq0ql1TPKnTU4AD8JJDWNn6eZjQXpQhTdMUmaH8pJjU-" + goldenVersion,
		wantOrg: "acme", wantProj: "flytesnacks", wantRead: true,
		templateSum: "6c6bdae15d82e64c", inputsSum: "67f1d35a73eb6433"},
	{name: "nested collections and maps",
		template: goldenTemplate("", "", goldenIfaceNested, "abc123"), inputs: goldenNested, version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-4tPsSqoQ-GKw-c0Pw-GQ8XcZoQIDpMYMtbmZJM_4tqV7L2NHeYEBUS4piX_xY-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "08b298b98db8e351", inputsSum: "1ca2c01d1158d5ee"},
	{name: "a scalar's metadata counts",
		template: goldenTemplate("", "", goldenIfaceMeta, "abc123"), inputs: goldenMetaInputs(`metadata { key: "k" value: "v" }`, ""), version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-JneSe9x8-1iqK0awh-HjBIwsvYyRUDUlTQgVJQ8sDcY9z5OASYcng768Gyc_4-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "3f16f5fe35c24b5e", inputsSum: "3cf8abbeaaa34c50"},
	{name: "a collection's own metadata does not count",
		template: goldenTemplate("", "", goldenIfaceMeta, "abc123"), inputs: goldenMetaInputs("", `metadata { key: "k" value: "v" }`), version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-JneSe9x8-1iqK0awh-5SeMo-o88yNl4olq0HUaTHM_UnrbqwJUWLjDBzoZx7E-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "3f16f5fe35c24b5e", inputsSum: "6d3a5e6a1fe63447"},
	{name: "no literal metadata",
		template: goldenTemplate("", "", goldenIfaceMeta, "abc123"), inputs: goldenMetaInputs("", ""), version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-JneSe9x8-1iqK0awh-5SeMo-o88yNl4olq0HUaTHM_UnrbqwJUWLjDBzoZx7E-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "3f16f5fe35c24b5e", inputsSum: "73e133629a83a958"},
	{name: "literals with a hash count by it alone",
		template: goldenTemplate("", "", goldenIfaceHash, "abc123"),
		inputs:   goldenHashInputs("s3://a/1.parquet", "s3://a/2.parquet", `metadata { key: "k" value: "v" }`), version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-NzgFSidc-J2qAfV9C-QlF7b61ycAtNOEIpDsgyTels1DOVw2VUlFyHjRTwnmc-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "ce29e49ccd9fe18b", inputsSum: "86e15ab24272dfb0"},
	{name: "literals with the same hash and other values: the same key",
		template: goldenTemplate("", "", goldenIfaceHash, "abc123"),
		inputs:   goldenHashInputs("s3://b/1.parquet", "s3://b/2.parquet", ""), version: goldenVersion,
		wantKey:  goldenIDNoOrg + "-NzgFSidc-J2qAfV9C-QlF7b61ycAtNOEIpDsgyTels1DOVw2VUlFyHjRTwnmc-" + goldenVersion,
		wantProj: "flytesnacks", wantRead: true,
		templateSum: "ce29e49ccd9fe18b", inputsSum: "15048370f68eff93"},
}

// countingReader serves one LiteralMap and counts the reads.
type countingReader struct {
	m     *core.LiteralMap
	reads int
}

func (r *countingReader) ReadInputs(context.Context, string) (*core.LiteralMap, error) {
	r.reads++
	return r.m, nil
}

func wireSum(t *testing.T, m proto.Message) string {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// TestTaskKeyMatchesFlyteGolden: for each template and inputs, TaskKey gives
// the key and the scope Flyte's executor sends to the cache service.
func TestTaskKeyMatchesFlyteGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := &core.TaskTemplate{}
			if err := prototext.Unmarshal([]byte(tc.template), tmpl); err != nil {
				t.Fatalf("template: %v", err)
			}
			inputs := &core.LiteralMap{}
			if err := prototext.Unmarshal([]byte(tc.inputs), inputs); err != nil {
				t.Fatalf("inputs: %v", err)
			}
			if got := wireSum(t, tmpl); got != tc.templateSum {
				t.Fatalf("the template is not the one Flyte's code hashed: sum %s, want %s", got, tc.templateSum)
			}
			if got := wireSum(t, inputs); got != tc.inputsSum {
				t.Fatalf("the inputs are not the ones Flyte's code hashed: sum %s, want %s", got, tc.inputsSum)
			}
			r := &countingReader{m: inputs}
			k, on, err := cache.TaskKey(context.Background(), r, tmpl, "s3://bucket/inputs", tc.version)
			if err != nil || !on {
				t.Fatalf("TaskKey: enabled=%v err=%v", on, err)
			}
			want := cache.Key{Org: tc.wantOrg, Project: tc.wantProj, Domain: "development", Key: tc.wantKey}
			if k != want {
				t.Fatalf("key\n got  %s\n want %s", k, want)
			}
			if read := r.reads > 0; read != tc.wantRead {
				t.Fatalf("inputs read: %v, want %v", read, tc.wantRead)
			}
			if err := k.Validate(); err != nil {
				t.Fatalf("the key does not validate: %v", err)
			}
		})
	}
}

// The parts of a golden key, each from its own function.
func TestKeyPartsMatchFlyteGolden(t *testing.T) {
	tmpl := &core.TaskTemplate{}
	if err := prototext.Unmarshal([]byte(goldenTemplate("", "", goldenIfaceN, "abc123")), tmpl); err != nil {
		t.Fatal(err)
	}
	inputs := &core.LiteralMap{}
	if err := prototext.Unmarshal([]byte(goldenN3), inputs); err != nil {
		t.Fatal(err)
	}
	id, err := cache.HashTaskIdentity(tmpl.GetId())
	if err != nil || id != goldenIDNoOrg {
		t.Fatalf("identity %s %v, want %s", id, err, goldenIDNoOrg)
	}
	sig, err := cache.HashInterface(tmpl.GetInterface())
	if err != nil || sig != "WNyXrUZC-J2qAfV9C" {
		t.Fatalf("interface %s %v", sig, err)
	}
	in, err := cache.HashInputs(inputs, nil)
	if err != nil || in != "vvL3cM1mzryVioHUaWRlm03TAw_yBloq986VtCEq33M" {
		t.Fatalf("inputs %s %v", in, err)
	}
	if want := id + "-" + sig + "-" + in + "-" + goldenVersion; want != goldenKeyN3 {
		t.Fatalf("the parts joined are %s, want %s", want, goldenKeyN3)
	}
}

// Fields of Flyte's schema that the generated types lack: Literal.artifact_id,
// Variable.artifact_partial_id and Variable.artifact_tag. The generated types
// cannot parse their text, so the template and the inputs are given in the
// wire form Flyte's program serialized (standard base64); flyteText shows
// what they hold in Flyte's text form: the inputs, and the interface where it
// is not goldenIfaceN (the rest of the template is goldenTemplate's, without
// an org, version abc123).
var goldenWireCases = []struct {
	name, flyteText  string
	template, inputs string
	wantKey          string
}{
	{name: "an input literal's artifact_id counts",
		flyteText: `literals { key: "n" value { scalar { primitive { integer: 3 } } artifact_id { key { project: "p" domain: "d" name: "a" org: "o" } version: "v1" } } }`,
		template:  "Ci8IARILZmx5dGVzbmFja3MaC2RldmVsb3BtZW50Igl3Zi5zcXVhcmUqBmFiYzEyMxIGcHl0aG9uGgUIATIBMSIbCgsKCQoBbhIECgIIARIMCgoKAm8wEgQKAggB",
		inputs:    "Ch8KAW4SGkoSCgwKAXASAWQaAWEiAW8SAnYxCgQKAggD",
		wantKey:   goldenIDNoOrg + "-WNyXrUZC-J2qAfV9C-pFMemndK63zFQj-hheJg8MxDA1lb0kYE_noDFL6H6ik-" + goldenVersion},
	{name: "the interface variables' artifact_partial_id and artifact_tag count",
		flyteText: `interface {
  inputs { variables { key: "n" value { type { simple: INTEGER } artifact_partial_id { artifact_key { project: "p" name: "model" } version: "latest" partitions { value { key: "region" value { static_value: "eu" } } value { key: "run" value { input_binding { var: "n" } } } value { key: "t" value { triggered_binding { partition_key: "ds" time_transform { transform: "-P1D" op: MINUS } } } } value { key: "rt" value { runtime_binding { } } } } time_partition { value { time_value { seconds: 1700000000 } } granularity: DAY } } } } }
  outputs { variables { key: "o0" value { type { simple: INTEGER } artifact_tag { artifact_key { name: "b" org: "o" } value { triggered_binding { bind_to_time_partition: true } } } } } }
}
literals { key: "n" value { scalar { primitive { integer: 3 } } } }`,
		template: "Ci8IARILZmx5dGVzbmFja3MaC2RldmVsb3BtZW50Igl3Zi5zcXVhcmUqBmFiYzEyMxIGcHl0aG9uGgUIATIBMSKOAQpuCmwKAW4SZwoCCAEaYQoKCgFwGgVtb2RlbBIGbGF0ZXN0Gj0KDgoGcmVnaW9uEgQKAmV1CggKAnJ0EgIqAAoMCgNydW4SBSIDCgFuChMKAXQSDhoMOgYKBC1QMUQqAmRzIgwKCBIGCIDiz6oGEAMSHAoaCgJvMBIUCgIIASIOCgYaAWIiAW8SBBoCMAE=",
		inputs:   "CgsKAW4SBgoECgIIAw==",
		wantKey:  goldenIDNoOrg + "-OlU8RIH2-yHEAGw2Q-vvL3cM1mzryVioHUaWRlm03TAw_yBloq986VtCEq33M-" + goldenVersion},
	{name: "artifact_id counts in a collection and a union, not beside a hash",
		flyteText: `interface {
  inputs {
    variables { key: "n" value { type { simple: INTEGER } } }
    variables { key: "c" value { type { collection_type { simple: INTEGER } } } }
    variables { key: "h" value { type { simple: INTEGER } } }
    variables { key: "u" value { type { union_type { variants { simple: INTEGER } } } } }
  }
  outputs { variables { key: "o0" value { type { simple: INTEGER } } } }
}
literals { key: "n" value { scalar { primitive { integer: 3 } } artifact_id { key { project: "p" domain: "d" name: "a" org: "o" } version: "v1" } } }
literals { key: "c" value { collection { literals { scalar { primitive { integer: 1 } } artifact_id { key { project: "p" domain: "d" name: "a" org: "o" } version: "v1" } } } } }
literals { key: "h" value { scalar { primitive { integer: 5 } } hash: "h5" artifact_id { key { project: "p" domain: "d" name: "a" org: "o" } version: "v1" } } }
literals { key: "u" value { scalar { union { value { scalar { primitive { integer: 2 } } artifact_id { key { project: "p" domain: "d" name: "a" org: "o" } version: "v1" } } type { simple: INTEGER } } } } }`,
		template: "Ci8IARILZmx5dGVzbmFja3MaC2RldmVsb3BtZW50Igl3Zi5zcXVhcmUqBmFiYzEyMxIGcHl0aG9uGgUIATIBMSJCCjIKCQoBbhIECgIIAQoLCgFjEgYKBBoCCAEKCQoBaBIECgIIAQoNCgF1EggKBlIECgIIARIMCgoKAm8wEgQKAggB",
		inputs:   "CiMKAWMSHhIcChpKEgoMCgFwEgFkGgFhIgFvEgJ2MQoECgIIAQojCgFoEh4iAmg1ShIKDAoBcBIBZBoBYSIBbxICdjEKBAoCCAUKHwoBbhIaShIKDAoBcBIBZBoBYSIBbxICdjEKBAoCCAMKKQoBdRIkCiJKIAoaShIKDAoBcBIBZBoBYSIBbxICdjEKBAoCCAISAggB",
		wantKey:  goldenIDNoOrg + "-r6h5V_U4-J2qAfV9C-xcDYNSx3AEZfEtSdz_aeHNr34x4J7FxzyWH6Pq3E0JE-" + goldenVersion},
}

// TestTaskKeyMatchesFlyteGoldenWithArtifactFields: what the generated types
// keep as unknown fields is hashed as Flyte hashes it.
func TestTaskKeyMatchesFlyteGoldenWithArtifactFields(t *testing.T) {
	for _, tc := range goldenWireCases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, inputs := &core.TaskTemplate{}, &core.LiteralMap{}
			for _, p := range []struct {
				b64 string
				m   proto.Message
			}{{tc.template, tmpl}, {tc.inputs, inputs}} {
				b, err := base64.StdEncoding.DecodeString(p.b64)
				if err != nil {
					t.Fatal(err)
				}
				if err := proto.Unmarshal(b, p.m); err != nil {
					t.Fatal(err)
				}
			}
			k, on, err := cache.TaskKey(context.Background(), &countingReader{m: inputs}, tmpl, "s3://bucket/inputs", goldenVersion)
			if err != nil || !on {
				t.Fatalf("TaskKey: enabled=%v err=%v", on, err)
			}
			want := cache.Key{Project: "flytesnacks", Domain: "development", Key: tc.wantKey}
			if k != want {
				t.Fatalf("key of\n%s\n got  %s\n want %s", tc.flyteText, k, want)
			}
		})
	}
}
