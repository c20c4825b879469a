// The Jinja engine against Python jinja2 (features.json rendered by templates/render.py into
// expected.json), plus unit tests naming the rule each one guards.
#include "text/jinja.hpp"
#include "text/jinja_value.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using json = nlohmann::ordered_json;

json load_json(const std::string& rel) {
  std::ifstream in(std::string(MET_SOURCE_DIR) + "/" + rel);
  REQUIRE_MESSAGE(in.good(), "cannot read " << rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

std::string render(const std::string& src, const json& ctx = json::object()) {
  auto t = met::Template::parse(src, "t");
  REQUIRE_MESSAGE(t.ok(), t.error().message);
  auto out = t->render(ctx);
  REQUIRE_MESSAGE(out.ok(), out.error().message);
  return *out;
}

std::string error_of(const std::string& src, const json& ctx = json::object()) {
  auto t = met::Template::parse(src, "t");
  if (!t.ok()) return t.error().message;
  auto out = t->render(ctx);
  REQUIRE_MESSAGE(!out.ok(), "expected an error, rendered '" << *out << "'");
  return out.error().message;
}

// First differing byte with context on both sides, for a readable failure.
std::string first_difference(const std::string& want, const std::string& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  std::size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  want: " + json(want.substr(from, 80)).dump() +
         "\n  got:  " + json(got.substr(from, 80)).dump();
}

}  // namespace

TEST_CASE("jinja features agree with python jinja2 byte for byte (features.json)") {
  json features = load_json("tests/serve/templates/features.json");
  json expected = load_json("tests/serve/templates/expected.json")["features"];
  int passed = 0;
  for (const auto& f : features) {
    const std::string name = f["name"];
    CAPTURE(name);
    REQUIRE_MESSAGE(expected.contains(name), "expected.json lacks '" << name << "': rerun render.py");
    const json& want = expected[name];
    auto t = met::Template::parse(f["template"].get<std::string>(), name);
    json ctx = f.value("context", json::object());
    auto out = t.ok() ? t->render(ctx) : met::Expected<std::string>(t.error());
    if (want.contains("output")) {
      if (!out.ok()) {
        FAIL_CHECK("unexpected error: " << out.error().message);
        continue;
      }
      if (*out != want["output"].get<std::string>()) {
        FAIL_CHECK(first_difference(want["output"], *out));
        continue;
      }
    } else {
      if (out.ok()) {
        FAIL_CHECK("jinja2 fails with '" << want["error"].get<std::string>() << "' but we rendered " << json(*out).dump());
        continue;
      }
      const std::string& msg = out.error().message;
      CHECK_MESSAGE(msg.rfind(name + ":", 0) == 0, "error not located: " << msg);
    }
    ++passed;
  }
  MESSAGE("features agreeing with jinja2: " << passed << "/" << features.size());
}

TEST_CASE("trim_blocks removes the newline after a block tag, lstrip_blocks the blanks before it") {
  CHECK(render("a\n  {% if true %}\n  b\n  {% endif %}\nc") == "a\n  b\nc");
  // a print tag is not a block: neither its leading blanks nor its newline go
  CHECK(render("  {{ 'x' }}\ny") == "  x\ny");
  // blanks before a tag that does not start its line stay
  CHECK(render("a  {% if 1 %}b{% endif %}") == "a  b");
  // `+` keeps both sides, `-` strips all whitespace on its side including newlines
  CHECK(render("a\n  {%+ if 1 %}b{% endif +%}\nc") == "a\n  b\nc");
  CHECK(render("a  \n\n {{- 'b' -}} \n\n c") == "abc");
  // comments take part in both rules
  CHECK(render("a\n  {# note #}\nb") == "a\nb");
}

TEST_CASE("one trailing newline of the source is dropped, CRLF becomes LF") {
  CHECK(render("a\n") == "a");
  CHECK(render("a\n\n") == "a\n");
  CHECK(render("a\r\nb") == "a\nb");
}

TEST_CASE("loop variables: index, first/last, length after the loop filter, previtem/nextitem, cycle") {
  CHECK(render("{% for x in [5, 6, 7] if x != 6 %}{{ loop.index }}/{{ loop.length }}{{ '!' if loop.last }} {% endfor %}") == "1/2 2/2! ");
  CHECK(render("{% for x in 'abc' %}{{ loop.previtem }}{{ x }}{{ loop.nextitem }}{{ loop.cycle('-', '+') }}{% endfor %}") ==
        "ab-abc+bc-");
  CHECK(render("{% for x in [] %}x{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in [3, 2, 1] %}{{ loop.revindex0 }}{% endfor %}") == "210");
}

TEST_CASE("a set inside a loop body lasts one iteration; namespace attributes survive the loop") {
  CHECK(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }}") == "11 11 1");
  CHECK(render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}") == "6");
  CHECK(error_of("{% set d = {} %}{% set d.x = 1 %}").find("cannot assign attribute on non-namespace object") != std::string::npos);
}

TEST_CASE("break and continue (loopcontrols)") {
  CHECK(render("{% for i in range(6) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 3 %}{% break %}{% endif %}{{ i }}{% endfor %}") == "02");
}

TEST_CASE("filters used by chat templates") {
  json ctx = {{"tools", json::array({{{"name", "f"}, {"d", "é"}}})}, {"m", {{"role", "user"}, {"content", "  hi  "}}}};
  CHECK(render("{{ tools[0] | tojson }}", ctx) == R"({"name": "f", "d": "é"})");
  CHECK(render("{{ tools[0] | tojson(indent=2) }}", ctx) == "{\n  \"name\": \"f\",\n  \"d\": \"é\"\n}");
  CHECK(render("[{{ m.content | trim }}]", ctx) == "[hi]");
  CHECK(render("{{ [3, 1, 2] | sort | join(',') }} {{ 'ab' | upper }} {{ [1, 2] | length }}") == "1,2,3 AB 2");
  CHECK(render("{{ [{'a': 1}, {'b': 2}] | selectattr('a', 'defined') | list | length }}") == "1");
  CHECK(render("{{ [{'a': 1}, {'a': 2}] | map(attribute='a') | join('+') }}") == "1+2");
  CHECK(render("{{ missing | default('d') }}") == "d");
}

TEST_CASE("python-like str() of values: reprs with capitalised constants") {
  CHECK(render("{{ [1, 'a', none, true, 2.0] }}") == "[1, 'a', None, True, 2.0]");
  CHECK(render("{{ {'k': (1,)} }}") == "{'k': (1,)}");
  CHECK(render("{{ none }} {{ True }} {{ 1e16 }} {{ 1e-5 }}") == "None True 1e+16 1e-05");
}

TEST_CASE("errors are lower-case and located at line:col of the template") {
  std::string e = error_of("line one\n  {{ x.y.z }}");
  CHECK_MESSAGE(e.rfind("t:2:", 0) == 0, e);
  CHECK(e.find("'x' is undefined") != std::string::npos);
  e = error_of("{% if %}");
  CHECK_MESSAGE(e.rfind("t:1:", 0) == 0, e);
  e = error_of("{% for x in y %}");
  CHECK_MESSAGE(e.find("unexpected end of template") != std::string::npos, e);
  e = error_of("ok\n{% frobnicate %}");
  CHECK_MESSAGE(e == "t:2:4: unknown tag 'frobnicate'", e);
  e = error_of("{{ 'a' + 1 }}");
  CHECK_MESSAGE(e.find("can only concatenate str") != std::string::npos, e);
}

TEST_CASE("raise_exception surfaces the template's message with its location") {
  std::string e = error_of("{% if true %}\n{{ raise_exception('Conversation roles must alternate') }}{% endif %}");
  CHECK_MESSAGE(e == "t:2:19: raise_exception: Conversation roles must alternate", e);
}

TEST_CASE("the immutable sandbox refuses mutation as jinja2 does") {
  CHECK(error_of("{% set l = [1] %}{{ l.append(2) }}").find("access to attribute 'append' of 'list' object is unsafe") !=
        std::string::npos);
  CHECK(error_of("{% set d = {'a': 1} %}{{ d.update({'b': 2}) }}").find("unsafe") != std::string::npos);
  // reading the attribute alone is an undefined, printed as nothing
  CHECK(render("[{{ [1].append }}]") == "[]");
}

TEST_CASE("strftime_now formats the current time") {
  CHECK(render("{{ strftime_now('%Y') | length }}") == "4");
}

TEST_CASE("malformed templates fail with a located error instead of crashing") {
  for (const char* src : {"{{", "{{ x", "{% if x %}", "{{ 'abc }}", "{# x", "{% raw %}x", "{{ x[ }}", "{% for %}",
                          "{{ (1, }}", "{% set %}", "{{ x | }}", "{% endif %}", "{{ } }}", "{% macro m( %}{% endmacro %}",
                          "{{ 1 +* 2 }}", "{% for x in y %}{% else %}{% else %}{% endfor %}"}) {
    CAPTURE(src);
    auto t = met::Template::parse(src, "bad");
    REQUIRE(!t.ok());
    CHECK_MESSAGE(t.error().message.rfind("bad:1:", 0) == 0, t.error().message);
  }
}

namespace {

// Nested `levels` deep: [[[...[0]...]]], built without recursion (nlohmann's destructor is iterative).
json nested_list(int levels) {
  json j = 0;
  for (int i = 0; i < levels; ++i) {
    json outer = json::array();
    outer.push_back(std::move(j));
    j = std::move(outer);
  }
  return j;
}

}  // namespace

TEST_CASE("a context nested far past the value depth bound is a located error, not a stack overflow") {
  // 200,000 levels overflow an 8 MiB stack in a recursive conversion; the bound refuses them first.
  const std::string e = error_of("{{ x }}", json{{"x", nested_list(200000)}});
  CHECK_MESSAGE(e == "t: render context: the context nests deeper than " + std::to_string(met::jinja::kMaxValueDepth) + " levels",
                e);
}

TEST_CASE("a context exactly at the value depth bound renders") {
  const std::string out = render("{{ x | tojson }}", json{{"x", nested_list(met::jinja::kMaxValueDepth - 1)}});
  CHECK(out == std::string(met::jinja::kMaxValueDepth - 1, '[') + "0" + std::string(met::jinja::kMaxValueDepth - 1, ']'));
}

TEST_CASE("a non-number where a method takes a count is a located error, as python's TypeError (found by jinja_fuzz)") {
  std::string e = error_of("{{ 'a-b-c'.rsplit('-', nothing) }}");
  CHECK_MESSAGE(e == "t:1:18: 'Undefined' object cannot be interpreted as an integer", e);
  e = error_of("{{ 'aXa'.replace('a', 'b', 'x') }}");
  CHECK_MESSAGE(e.find("'str' object cannot be interpreted as an integer") != std::string::npos, e);
}

TEST_CASE("a macro that calls itself without end is a located error, not a stack overflow (found by jinja_fuzz)") {
  const std::string e = error_of("{% macro m(x) %}{{ m(x) }}{% endmacro %}{{ m(1) }}");
  CHECK_MESSAGE(e.find("maximum recursion depth exceeded") != std::string::npos, e);
  // A recursion that ends renders: 10 levels.
  CHECK(render("{% macro m(n) %}{{ n }}{% if n > 0 %}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(9) }}") == "9876543210");
}

TEST_CASE("64-bit integer arithmetic that would overflow is an error, never a wrapped value") {
  const char* const overflowing[] = {
      "{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775807 - 2 }}", "{{ 4052555153018976267 * 27 }}",
      "{{ 2 ** 63 }}",                 "{{ 3 ** 1000000000000000000 }}", "{{ -(-9223372036854775807 - 1) }}",
      "{{ (-9223372036854775807 - 1) // -1 }}", "{{ (-9223372036854775807 - 1) | abs }}",
  };
  for (const char* src : overflowing) CHECK_MESSAGE(error_of(src).find("integer overflow") != std::string::npos, src);
  CHECK(render("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1 ** 1000000000000000000 }} {{ 7 // -1 }} {{ 7 % -1 }}") ==
        "4611686018427387904 -9223372036854775808 1 -7 0");
  CHECK(render("{{ range(9223372036854775806, 9223372036854775807, 1000) | list }}") == "[9223372036854775806]");
  CHECK(error_of("{{ 'ab' * 1000000000000 }}").find("too large") != std::string::npos);
  CHECK(error_of("{{ {'a': 1} | tojson(indent=244540000000000) }}").find("too large") != std::string::npos);
  CHECK(error_of("{{ 'a\nb' | indent(244540000000000) }}").find("too large") != std::string::npos);
}

TEST_CASE("a template nested past the bound is a located parse error, not a stack overflow (found by jinja_fuzz)") {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int k = 0; k < n; ++k) out += s;
    return out;
  };
  const std::string want = "the template nests deeper than 200 levels";
  const std::string deep[] = {
      "{{ " + repeat("-", 2700) + "1 }}",                                 // the fuzzer's input: unary minus on unary minus
      "{{ " + repeat("(", 300) + "1" + repeat(")", 300) + " }}",          // parentheses
      "{{ 1" + repeat(" + 1", 100000) + " }}",                             // a chain the parser builds in a loop
      "{{ x" + repeat(" | string", 5000) + " }}",                          // filters
      "{{ x" + repeat(".a", 5000) + " }}",                                 // attributes
      repeat("{% if true %}", 300) + "x" + repeat("{% endif %}", 300),     // statements
  };
  for (const auto& src : deep) {
    const std::string e = error_of(src);
    CHECK_MESSAGE(e.find(want) != std::string::npos, src.substr(0, 40) << ": " << e);
  }
  // A long chain that then fails to parse is freed without recursing once per level.
  CHECK(error_of("{{ 1" + repeat(" + 1", 200000) + " + }}").find("unexpected") != std::string::npos);
  // Nesting within the bound renders as jinja2 does.
  CHECK(render("{{ " + repeat("(", 150) + "2" + repeat(")", 150) + " }}") == "2");
  CHECK(render("{{ 0" + repeat(" + 1", 150) + " }}") == "150");
  CHECK(render("{{ " + repeat("-", 150) + "1 }}") == "1");
  CHECK(render(repeat("{% if true %}", 150) + "x" + repeat("{% endif %}", 150)) == "x");
}

TEST_CASE("|int of a float or numeric string outside 64 bits is an overflow error, NaN the default, as python's int (found by jinja_fuzz)") {
  for (const char* src : {"{{ '11111111111111111111111111111111111111111111111111111111111111111111111112'|int }}",
                          "{{ 1e300|int }}", "{{ '-1e19'|int }}", "{{ 'inf'|int }}", "{{ 9223372036854775808.0|int }}"})
    CHECK_MESSAGE(error_of(src).find("integer overflow in int") != std::string::npos, src);
  CHECK(render("{{ 'nan'|int(7) }} {{ 3.9|int }} {{ -3.9|int }} {{ '42.7'|int }} {{ 9223372036854774784.0|int }}") ==
        "7 3 -3 42 9223372036854774784");
}
