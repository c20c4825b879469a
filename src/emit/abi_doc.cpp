// The field table and markdown of the packet ABI, both expanded from packet_fields.def so the
// docs, the layout tests and the C structs cannot disagree.
#include "emit/abi_doc.hpp"

#include <cstddef>

#include <fmt/format.h>

#include "emit/packet.hpp"
#include "emit/packet_abi.h"

namespace met::emit {

namespace {

// Record docs by record name, then the field rows; both expanded from the .def.
struct RecordDoc {
  const char* name;
  const char* doc;
};

const RecordDoc kRecords[] = {
#define MET_STRUCT(S, doc) {#S, doc},
#define MET_FIELD(S, type, name, doc)
#define MET_ARRAY(S, type, name, count, doc)
#define MET_END(S)
#include "emit/packet_fields.def"
#undef MET_STRUCT
#undef MET_FIELD
#undef MET_ARRAY
#undef MET_END
};

const char* record_doc(const std::string& name) {
  for (const auto& r : kRecords) {
    if (name == r.name) return r.doc;
  }
  return "";
}

std::vector<AbiField> build_fields() {
  std::vector<AbiField> out;
#define MET_STRUCT(S, doc)
#define MET_FIELD(S, type, name, doc) \
  out.push_back(                      \
      AbiField{#S, record_doc(#S), #type, #name, 1, sizeof(met_abi_##type), offsetof(MetPkt##S, name), sizeof(MetPkt##S), doc});
#define MET_ARRAY(S, type, name, count, doc)                                                                         \
  out.push_back(AbiField{#S, record_doc(#S), #type, #name, count, sizeof(met_abi_##type), offsetof(MetPkt##S, name), \
                         sizeof(MetPkt##S), doc});
#define MET_END(S)
#include "emit/packet_fields.def"
#undef MET_STRUCT
#undef MET_FIELD
#undef MET_ARRAY
#undef MET_END
  return out;
}

struct EnumValue {
  std::uint32_t value;
  const char* c_name;
  const char* word;
  std::uint32_t bytes;  // dtypes only
};

const EnumValue kDtypes[] = {
    {MET_DTYPE_BF16, "MET_DTYPE_BF16", "bf16", 2}, {MET_DTYPE_F16, "MET_DTYPE_F16", "f16", 2},
    {MET_DTYPE_F32, "MET_DTYPE_F32", "f32", 4},    {MET_DTYPE_FP8_E4M3, "MET_DTYPE_FP8_E4M3", "fp8_e4m3", 1},
    {MET_DTYPE_I32, "MET_DTYPE_I32", "i32", 4},    {MET_DTYPE_I64, "MET_DTYPE_I64", "i64", 8},
    {MET_DTYPE_U8, "MET_DTYPE_U8", "u8", 1},
};
const EnumValue kSources[] = {
    {MET_SOURCE_CHECKPOINT, "MET_SOURCE_CHECKPOINT", "checkpoint", 0},
    {MET_SOURCE_GENERATED, "MET_SOURCE_GENERATED", "generated", 0},
    {MET_SOURCE_SCRATCH, "MET_SOURCE_SCRATCH", "scratch", 0},
    {MET_SOURCE_KV, "MET_SOURCE_KV", "kv", 0},
    {MET_SOURCE_IO, "MET_SOURCE_IO", "io", 0},
};
const EnumValue kKinds[] = {
    {MET_PROGRAM_PREFILL, "MET_PROGRAM_PREFILL", "prefill", 0},
    {MET_PROGRAM_DECODE, "MET_PROGRAM_DECODE", "decode", 0},
};

template <std::size_t N>
const EnumValue* find(const EnumValue (&values)[N], std::uint32_t v) {
  for (const auto& e : values) {
    if (e.value == v) return &e;
  }
  return nullptr;
}

template <std::size_t N>
void enum_table(std::string& md, const char* title, const EnumValue (&values)[N], bool with_bytes) {
  md += fmt::format("### {}\n\n", title);
  md += with_bytes ? "| value | name | word | bytes per element |\n|---|---|---|---|\n"
                   : "| value | name | word |\n|---|---|---|\n";
  for (const auto& e : values) {
    md += with_bytes ? fmt::format("| {} | `{}` | {} | {} |\n", e.value, e.c_name, e.word, e.bytes)
                     : fmt::format("| {} | `{}` | {} |\n", e.value, e.c_name, e.word);
  }
  md += "\n";
}

}  // namespace

const std::vector<AbiField>& abi_fields() {
  static const std::vector<AbiField> fields = build_fields();
  return fields;
}

const char* dtype_name(std::uint32_t dtype) {
  const auto* e = find(kDtypes, dtype);
  return e ? e->word : nullptr;
}
const char* source_name(std::uint32_t source) {
  const auto* e = find(kSources, source);
  return e ? e->word : nullptr;
}
const char* program_kind_name(std::uint32_t kind) {
  const auto* e = find(kKinds, kind);
  return e ? e->word : nullptr;
}
std::uint32_t dtype_bytes(std::uint32_t dtype) {
  const auto* e = find(kDtypes, dtype);
  return e ? e->bytes : 0;
}

std::string abi_markdown() {
  std::string md;
  md += fmt::format("ABI version {}, hash `{:#010x}`, magic `{:#018x}` (\"METPKT01\"), no-tensor handle `{:#010x}`.\n\n",
                    MET_PACKET_VERSION, abi_hash(), MET_PACKET_MAGIC, MET_NO_TENSOR);
  md += "All records are little-endian with no implicit padding; tables start 8-byte aligned.\n\n";
  const auto& fields = abi_fields();
  for (std::size_t k = 0; k < fields.size(); ++k) {
    const auto& f = fields[k];
    if (k == 0 || fields[k - 1].record != f.record) {
      md += fmt::format("### {} ({} bytes)\n\n{}.\n\n", f.record, f.record_bytes, f.record_doc);
      md += "| offset | field | type | count | description |\n|---|---|---|---|---|\n";
    }
    md += fmt::format("| {} | `{}` | {} | {} | {} |\n", f.offset, f.name, f.type, f.count, f.doc);
    if (k + 1 == fields.size() || fields[k + 1].record != f.record) md += "\n";
  }
  enum_table(md, "dtype (Tensor.dtype)", kDtypes, /*with_bytes=*/true);
  enum_table(md, "source (Tensor.source)", kSources, /*with_bytes=*/false);
  enum_table(md, "program kind (Program.kind)", kKinds, /*with_bytes=*/false);
  return md;
}

namespace {

struct Span {
  std::size_t begin = 0, end = 0;  // the generated text: after the begin marker's line, before the end marker
};

Expected<Span> generated_span(const std::string& doc, const std::string& display) {
  const auto b = doc.find(kAbiDocBegin);
  if (b == std::string::npos) return fail(fmt::format("{}: no '{}' marker", display, kAbiDocBegin));
  auto start = b + std::string(kAbiDocBegin).size();
  if (start < doc.size() && doc[start] == '\n') ++start;
  const auto e = doc.find(kAbiDocEnd, start);
  if (e == std::string::npos) return fail(fmt::format("{}: no '{}' marker after '{}'", display, kAbiDocEnd, kAbiDocBegin));
  return Span{start, e};
}

}  // namespace

Expected<std::string> abi_doc_generated_part(const std::string& doc, const std::string& display) {
  MET_TRY(const Span s, generated_span(doc, display));
  return doc.substr(s.begin, s.end - s.begin);
}

Expected<std::string> abi_doc_updated(const std::string& doc, const std::string& display) {
  MET_TRY(const Span s, generated_span(doc, display));
  return doc.substr(0, s.begin) + abi_markdown() + doc.substr(s.end);
}

}  // namespace met::emit
