// HTTP GET through libcurl, the only network access met makes (the Hub client uses it). A body
// is capped: a response longer than `max_bytes` is cut off by aborting the transfer, so a server
// that ignores a range request cannot make met download weights.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/expected.hpp"

namespace met::hub {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;                              // "Name: value"
  std::optional<std::pair<std::uint64_t, std::uint64_t>> range;  // inclusive bytes [first, last]
  std::uint64_t max_bytes = 16u << 20;                           // longer bodies are refused
  long timeout_s = 60;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string content_range;  // the Content-Range header of a 206, "" otherwise
};

// Follows redirects (an Authorization header is not sent to another host). A transport failure
// (DNS, connect, TLS, timeout) is an error naming the URL and curl's reason; any HTTP status is a
// response.
Expected<HttpResponse> http_get(const HttpRequest& request);

}  // namespace met::hub
