// The packet ABI described as data, derived from packet_fields.def: one row per field with its
// C offset and size, the names of the enum values, and the markdown that docs/arch/packet-abi.md
// embeds. Layout tests, the parser, the disassembler and the docs all read these tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"

namespace met::emit {

struct AbiField {
  std::string record;            // "Header"
  std::string record_doc;        // what the record is
  std::string type;              // "u32"
  std::string name;              // "sm_count"
  std::size_t count = 1;         // array length (1 for a scalar)
  std::size_t type_bytes = 0;    // bytes of one element
  std::size_t offset = 0;        // offsetof in the C struct of packet_abi.h
  std::size_t record_bytes = 0;  // sizeof the C struct
  std::string doc;
};

// Every field of every record, in .def order.
const std::vector<AbiField>& abi_fields();

// Names of enum values as lower-case words ("bf16", "checkpoint", "decode"); nullptr when the
// value is not defined by this ABI (the parser refuses such values).
const char* dtype_name(std::uint32_t dtype);
const char* source_name(std::uint32_t source);
const char* program_kind_name(std::uint32_t kind);
// Bytes of one element of a dtype (fp8: 1); 0 when unknown.
std::uint32_t dtype_bytes(std::uint32_t dtype);

// Markdown: per record a table of (offset, field, type, count, description), then the enums and
// constants. docs/arch/packet-abi.md embeds exactly this between its generated markers.
std::string abi_markdown();

inline constexpr const char* kAbiDocBegin = "<!-- generated: met circuit abi -->";
inline constexpr const char* kAbiDocEnd = "<!-- end generated -->";

// The part of a document between the markers (exclusive, without the newline after the begin
// marker); an error naming `display` when a marker is missing or out of order.
Expected<std::string> abi_doc_generated_part(const std::string& doc, const std::string& display);
// The document with its generated part replaced by abi_markdown().
Expected<std::string> abi_doc_updated(const std::string& doc, const std::string& display);

}  // namespace met::emit
