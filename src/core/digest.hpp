// SHA-256 of canonical text (OpenSSL libcrypto). Plan digests hash the canonical plan text.
#pragma once

#include <string>
#include <string_view>

namespace met {

// Lower-case hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);

}  // namespace met
