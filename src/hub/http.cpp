#include "hub/http.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <cctype>
#include <memory>

namespace met::hub {

namespace {

struct Sink {
  std::string body;
  std::uint64_t max_bytes = 0;
  bool overflow = false;
  std::string content_range;
};

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t bytes = size * n;
  if (sink->body.size() + bytes > sink->max_bytes) {
    sink->overflow = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  sink->body.append(data, bytes);
  return bytes;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::string line(data, size * n);
  const std::string key = "content-range:";
  if (line.size() > key.size()) {
    std::string head = line.substr(0, key.size());
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (head == key) {
      std::string v = line.substr(key.size());
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(v.begin());
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
      sink->content_range = v;
    }
  }
  return size * n;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct ListDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

}  // namespace

Expected<HttpResponse> http_get(const HttpRequest& request) {
  static const bool initialised = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!initialised) return fail("http: libcurl failed to initialise");
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return fail("http: libcurl failed to make a handle");
  std::unique_ptr<curl_slist, ListDeleter> headers;
  for (const auto& h : request.headers) {
    curl_slist* grown = curl_slist_append(headers.get(), h.c_str());
    if (!grown) return fail("http: out of memory for request headers");
    (void)headers.release();
    headers.reset(grown);
  }
  Sink sink;
  sink.max_bytes = request.max_bytes;
  const std::string range = request.range ? fmt::format("{}-{}", request.range->first, request.range->second) : "";
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, request.timeout_s);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "met-hub-client");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &sink);
  if (request.range) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  const CURLcode rc = curl_easy_perform(c);
  if (sink.overflow) {
    return fail(fmt::format("{}: the response is longer than the {} bytes asked for; stopped reading{}", request.url,
                            request.max_bytes, request.range ? " (the server ignored the range request)" : ""));
  }
  if (rc != CURLE_OK) return fail(fmt::format("{}: network failure: {}", request.url, curl_easy_strerror(rc)));
  HttpResponse r;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  r.body = std::move(sink.body);
  r.content_range = std::move(sink.content_range);
  return r;
}

}  // namespace met::hub
