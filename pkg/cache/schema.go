package cache

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/taskaction/executor/gen/flyteidl2/core"
)

// Flyte's schema of what the cache key hashes has three fields that the
// executor's generated types leave out: Literal.artifact_id (9),
// Variable.artifact_partial_id (3) and Variable.artifact_tag (4), whose types
// Flyte declares in flyteidl2/core/artifact_id.proto. Decoded into the
// generated types they are kept as unknown fields, which the JSON encoder
// drops; Flyte's hash has them. So a message that carries unknown fields is
// hashed as a dynamic message of the generated schema with those fields
// added (flyteSchema). Messages without unknown fields, nearly all of them,
// are hashed as they are: the JSON is the same either way.

// artifactFile is the descriptor of the artifact messages Flyte's cache key
// can meet: the field types of the three fields, and theirs.
func artifactFile() *descriptorpb.FileDescriptorProto {
	const pkg = ".flyteidl2.core."
	str := func(name string, n int32) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()}
	}
	typed := func(name string, n int32, t descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := str(name, n)
		f.Type, f.TypeName = t.Enum(), proto.String(typeName)
		return f
	}
	msg := func(name string, n int32, typeName string) *descriptorpb.FieldDescriptorProto {
		return typed(name, n, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, typeName)
	}
	inOneof := func(f *descriptorpb.FieldDescriptorProto) *descriptorpb.FieldDescriptorProto {
		f.OneofIndex = proto.Int32(0)
		return f
	}
	message := func(name string, fields ...*descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields}
	}
	withOneof := func(m *descriptorpb.DescriptorProto, name string) *descriptorpb.DescriptorProto {
		m.OneofDecl = []*descriptorpb.OneofDescriptorProto{{Name: proto.String(name)}}
		return m
	}
	enum := func(name string, values ...string) *descriptorpb.EnumDescriptorProto {
		e := &descriptorpb.EnumDescriptorProto{Name: proto.String(name)}
		for i, v := range values {
			e.Value = append(e.Value, &descriptorpb.EnumValueDescriptorProto{Name: proto.String(v), Number: proto.Int32(int32(i))})
		}
		return e
	}

	partitions := message("Partitions", msg("value", 1, pkg+"Partitions.ValueEntry"))
	partitions.Field[0].Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	partitions.NestedType = []*descriptorpb.DescriptorProto{{
		Name:    proto.String("ValueEntry"),
		Field:   []*descriptorpb.FieldDescriptorProto{str("key", 1), msg("value", 2, pkg+"LabelValue")},
		Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
	}}
	return &descriptorpb.FileDescriptorProto{
		Name:       proto.String("flyteidl2/core/artifact_id.proto"),
		Package:    proto.String("flyteidl2.core"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{timestamppb.File_google_protobuf_timestamp_proto.Path()},
		EnumType: []*descriptorpb.EnumDescriptorProto{
			enum("Granularity", "UNSET", "MINUTE", "HOUR", "DAY", "MONTH"),
			enum("Operator", "MINUS", "PLUS"),
		},
		MessageType: []*descriptorpb.DescriptorProto{
			message("ArtifactKey", str("project", 1), str("domain", 2), str("name", 3), str("org", 4)),
			message("ArtifactVersionId", msg("key", 1, pkg+"ArtifactKey"), str("version", 2)),
			withOneof(message("ArtifactBindingData",
				inOneof(str("partition_key", 5)),
				inOneof(typed("bind_to_time_partition", 6, descriptorpb.FieldDescriptorProto_TYPE_BOOL, "")),
				msg("time_transform", 7, pkg+"TimeTransform")), "partition_data"),
			message("TimeTransform", str("transform", 1), typed("op", 2, descriptorpb.FieldDescriptorProto_TYPE_ENUM, pkg+"Operator")),
			message("InputBindingData", str("var", 1)),
			message("RuntimeBinding"),
			withOneof(message("LabelValue",
				inOneof(str("static_value", 1)),
				inOneof(msg("time_value", 2, ".google.protobuf.Timestamp")),
				inOneof(msg("triggered_binding", 3, pkg+"ArtifactBindingData")),
				inOneof(msg("input_binding", 4, pkg+"InputBindingData")),
				inOneof(msg("runtime_binding", 5, pkg+"RuntimeBinding"))), "value"),
			partitions,
			message("TimePartition", msg("value", 1, pkg+"LabelValue"),
				typed("granularity", 2, descriptorpb.FieldDescriptorProto_TYPE_ENUM, pkg+"Granularity")),
			message("ArtifactID", msg("artifact_key", 1, pkg+"ArtifactKey"), str("version", 2),
				msg("partitions", 3, pkg+"Partitions"), msg("time_partition", 4, pkg+"TimePartition")),
			message("ArtifactTag", msg("artifact_key", 1, pkg+"ArtifactKey"), msg("value", 2, pkg+"LabelValue")),
		},
	}
}

// withFields is the generated file fd with fields added to its message
// named msg (those it lacks), and a dependency on the artifact file.
func withFields(fd protoreflect.FileDescriptor, msg string, fields ...*descriptorpb.FieldDescriptorProto) *descriptorpb.FileDescriptorProto {
	fdp := protodesc.ToFileDescriptorProto(fd)
	fdp.Dependency = append(fdp.Dependency, artifactFile().GetName())
	for _, m := range fdp.GetMessageType() {
		if m.GetName() != msg {
			continue
		}
	next:
		for _, f := range fields {
			for _, have := range m.GetField() {
				if have.GetNumber() == f.GetNumber() {
					continue next
				}
			}
			m.Field = append(m.Field, f)
		}
	}
	return fdp
}

// chain resolves from the first registry, then the second.
type chain struct{ first, then protodesc.Resolver }

func (c chain) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	if fd, err := c.first.FindFileByPath(p); err == nil {
		return fd, nil
	}
	return c.then.FindFileByPath(p)
}

func (c chain) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := c.first.FindDescriptorByName(n); err == nil {
		return d, nil
	}
	return c.then.FindDescriptorByName(n)
}

// flyteSchema holds the literals and interface files with Flyte's artifact
// fields, and the artifact file; the rest resolves to the generated files.
var flyteSchema = sync.OnceValues(func() (*protoregistry.Files, error) {
	field := func(name string, n int32, typeName string) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(),
			TypeName: proto.String(".flyteidl2.core." + typeName)}
	}
	files := new(protoregistry.Files)
	for _, fdp := range []*descriptorpb.FileDescriptorProto{
		artifactFile(),
		withFields(core.File_flyteidl2_core_literals_proto, "Literal", field("artifact_id", 9, "ArtifactVersionId")),
		withFields(core.File_flyteidl2_core_interface_proto, "Variable",
			field("artifact_partial_id", 3, "ArtifactID"), field("artifact_tag", 4, "ArtifactTag")),
	} {
		fd, err := protodesc.NewFile(fdp, chain{files, protoregistry.GlobalFiles})
		if err != nil {
			return nil, fmt.Errorf("building the cache key schema of %s: %w", fdp.GetName(), err)
		}
		if err := files.RegisterFile(fd); err != nil {
			return nil, fmt.Errorf("building the cache key schema of %s: %w", fdp.GetName(), err)
		}
	}
	return files, nil
})

// inFlyteSchema is m as Flyte's schema reads it: m itself when it carries no
// unknown field, else a dynamic message of Flyte's schema decoded from m's
// wire form, in which the fields the generated types lack are known.
func inFlyteSchema(m proto.Message) (proto.Message, error) {
	if !hasUnknown(m.ProtoReflect()) {
		return m, nil
	}
	files, err := flyteSchema()
	if err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName(m.ProtoReflect().Descriptor().FullName())
	if err != nil {
		if errors.Is(err, protoregistry.NotFound) {
			return m, nil // a message Flyte's schema adds nothing to
		}
		return nil, err
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return m, nil
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	dm := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(b, dm); err != nil {
		return nil, err
	}
	return dm, nil
}

// hasUnknown says whether m or a message in it carries unknown fields.
func hasUnknown(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
					found = hasUnknown(e.Message())
					return !found
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i, l := 0, v.List(); i < l.Len() && !found; i++ {
					found = hasUnknown(l.Get(i).Message())
				}
			}
		case fd.Message() != nil:
			found = hasUnknown(v.Message())
		}
		return !found
	})
	return found
}
