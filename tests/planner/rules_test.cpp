// Rule inheritance over a two-class chain in memory (base <- child): overrides by id, `remove`,
// and the located errors of a broken FUSIONS.toml.
#include <doctest/doctest.h>

#include "planner/rules.hpp"

using met::MemTree;
using met::planner::load_rules;
using met::planner::RuleSet;

namespace {

std::string rule(const std::string& id, const std::string& pattern, const std::string& kernel, int priority) {
  return "[[rule]]\nid = \"" + id + "\"\npattern = " + pattern + "\nkernel = \"" + kernel +
         "\"\nfamily = \"fam\"\nmodes = [\"decode\"]\nrows = [1, 16]\npriority = " + std::to_string(priority) +
         "\nformats = [{ weight = \"bf16\", act = \"bf16\", exec = \"native\", math = \"bf16\" }]\n\n";
}

const std::string kBase = rule("r_norm", "[\"rmsnorm\"]", "k_norm", 10) + rule("r_gemv", "[\"linear\"]", "k_gemv", 10) +
                          rule("r_res", "[\"residual\"]", "k_res", 10);

struct Chain {
  met::avail::ClassInfo base, child;
  met::avail::ClassChain chain;
  Chain() {
    base.id = "base";
    child.id = "child";
    child.inherits = "base";
    chain.chain = {&base, &child};
  }
};

MemTree tree(const std::string& child_fusions) {
  return MemTree({{"base/FUSIONS.toml", kBase},
                  {"base/KERNEL_FAMILIES.toml",
                   "[[family]]\nid = \"fam\"\nunit = \"cuda_core\"\nrows_per_launch = 16\n"
                   "kernels = [\"k_norm\", \"k_gemv\", \"k_res\"]\nevidence = \"unmeasured\"\n"},
                  {"child/FUSIONS.toml", child_fusions},
                  {"child/KERNEL_FAMILIES.toml",
                   "[[family]]\nid = \"fam\"\nunit = \"cuda_core\"\nrows_per_launch = 16\n"
                   "kernels = [\"k_gemv_fast\"]\nevidence = \"unmeasured\"\n"}});
}

met::Expected<RuleSet> load(const std::string& child_fusions) {
  const Chain c;
  const MemTree t = tree(child_fusions);
  return load_rules(t, c.chain);
}

const met::planner::Rule* find(const RuleSet& rs, const std::string& id) {
  for (const auto& r : rs.rules) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a child inherits every rule of its parent") {
  auto rs = load("");
  REQUIRE_MESSAGE(rs.ok(), (rs.ok() ? "" : rs.error().message));
  CHECK(rs->rules.size() == 3);
  REQUIRE(find(*rs, "r_gemv"));
  CHECK(find(*rs, "r_gemv")->klass == "base");
  // A child family of the same id adds its kernels to the parent's.
  REQUIRE(rs->families.count("fam"));
  CHECK(rs->family_of_kernel.count("k_norm"));
  CHECK(rs->family_of_kernel.count("k_gemv_fast"));
}

TEST_CASE("a child rule with an inherited id replaces it (catches both kept, or the parent winning)") {
  auto rs = load(rule("r_gemv", "[\"linear\"]", "k_gemv_fast", 50));
  REQUIRE_MESSAGE(rs.ok(), (rs.ok() ? "" : rs.error().message));
  CHECK(rs->rules.size() == 3);
  int count = 0;
  for (const auto& r : rs->rules) count += r.id == "r_gemv";
  CHECK(count == 1);
  const auto* r = find(*rs, "r_gemv");
  REQUIRE(r);
  CHECK(r->klass == "child");
  CHECK(r->kernels == std::vector<std::string>{"k_gemv_fast"});
  CHECK(r->priority == 50);
  CHECK(rs->rules.front().id == "r_gemv");  // re-sorted by its new priority
  CHECK(r->location.find("kernels/child/FUSIONS.toml:") == 0);
}

TEST_CASE("remove drops an inherited rule and keeps the others") {
  auto rs = load("remove = [\"r_res\"]\n");
  REQUIRE_MESSAGE(rs.ok(), (rs.ok() ? "" : rs.error().message));
  CHECK(rs->rules.size() == 2);
  CHECK(find(*rs, "r_res") == nullptr);
  CHECK(find(*rs, "r_norm") != nullptr);
  CHECK(find(*rs, "r_gemv") != nullptr);
}

TEST_CASE("removing an id no parent defines is a located error naming the id") {
  auto rs = load("# child rules\nremove = [\"r_nope\"]\n");
  REQUIRE_FALSE(rs.ok());
  const std::string& msg = rs.error().message;
  CAPTURE(msg);
  CHECK(msg.find("kernels/child/FUSIONS.toml:2") == 0);
  CHECK(msg.find("'r_nope'") != std::string::npos);
}

TEST_CASE("an unknown op in a pattern is a located error naming the op and the rule") {
  auto rs = load("\n\n" + rule("r_qkv", "[\"rmsnorm\", \"rope2\"]", "k_gemv_fast", 20));
  REQUIRE_FALSE(rs.ok());
  const std::string& msg = rs.error().message;
  CAPTURE(msg);
  // The pattern key is on line 5 of the child file (two blank lines, [[rule]], id, pattern).
  CHECK(msg.find("kernels/child/FUSIONS.toml:5") == 0);
  CHECK(msg.find("rule 'r_qkv'") != std::string::npos);
  CHECK(msg.find("unknown op 'rope2'") != std::string::npos);
}

TEST_CASE("a rule naming a kernel its family does not list is an error") {
  auto rs = load(rule("r_new", "[\"linear\"]", "k_elsewhere", 20));
  REQUIRE_FALSE(rs.ok());
  CHECK(rs.error().message.find("k_elsewhere") != std::string::npos);
  CHECK(rs.error().message.find("kernels/child/FUSIONS.toml:") == 0);
}

TEST_CASE("two rules of one id in the same file are an error, not an override") {
  auto rs = load(rule("r_x", "[\"linear\"]", "k_gemv_fast", 20) + rule("r_x", "[\"linear\"]", "k_gemv_fast", 30));
  REQUIRE_FALSE(rs.ok());
  CHECK(rs.error().message.find("duplicate rule id 'r_x'") != std::string::npos);
}

TEST_CASE("an unknown key in a rule is rejected, never ignored") {
  auto rs = load("[[rule]]\nid = \"r_y\"\npattern = [\"linear\"]\nkernel = \"k_gemv_fast\"\nfamily = \"fam\"\n"
                 "modes = [\"decode\"]\nrows = [1, 16]\npriority = 1\nprio = 2\n"
                 "formats = [{ weight = \"bf16\", act = \"bf16\", exec = \"native\", math = \"bf16\" }]\n");
  REQUIRE_FALSE(rs.ok());
  CHECK(rs.error().message.find("prio") != std::string::npos);
}

TEST_CASE("prefill_rows: the rule's rows in prefill steps (its other modes keep rows); refused without prefill or out of order") {
  auto rule_with = [](const std::string& modes, const std::string& extra) {
    return "[[rule]]\nid = \"r_y\"\npattern = [\"linear\"]\nkernel = \"k_gemv_fast\"\nfamily = \"fam\"\n"
           "modes = " + modes + "\nrows = [17, 1048576]\n" + extra + "priority = 1\n"
           "formats = [{ weight = \"bf16\", act = \"bf16\", exec = \"native\", math = \"bf16\" }]\n";
  };
  auto rs = load(rule_with("[\"prefill\", \"batch\"]", "prefill_rows = [1, 1048576]\n"));
  REQUIRE_MESSAGE(rs.ok(), (rs.ok() ? "" : rs.error().message));
  const auto* found = find(*rs, "r_y");
  REQUIRE(found);
  const auto& r = *found;
  CHECK(r.takes(met::planner::Mode::prefill, 1));
  CHECK(r.takes(met::planner::Mode::prefill, 16));
  CHECK_FALSE(r.takes(met::planner::Mode::batch, 16));
  CHECK(r.takes(met::planner::Mode::batch, 17));
  CHECK_FALSE(r.takes(met::planner::Mode::decode, 17));
  auto no_prefill = load(rule_with("[\"batch\"]", "prefill_rows = [1, 16]\n"));
  REQUIRE_FALSE(no_prefill.ok());
  CHECK(no_prefill.error().message.find("'prefill_rows': the rule's modes do not include prefill") != std::string::npos);
  auto backwards = load(rule_with("[\"prefill\"]", "prefill_rows = [16, 1]\n"));
  REQUIRE_FALSE(backwards.ok());
  CHECK(backwards.error().message.find("'prefill_rows': expected [min, max] with 1 <= min <= max") != std::string::npos);
}

TEST_CASE(
    "a rule listing mode verify is refused: verify plans with the prefill and decode rules (catches a second set of rules for "
    "it)") {
  auto rs = load(
      "[[rule]]\nid = \"r_y\"\npattern = [\"linear\"]\nkernel = \"k_gemv_fast\"\nfamily = \"fam\"\n"
      "modes = [\"verify\"]\nrows = [1, 16]\npriority = 1\n"
      "formats = [{ weight = \"bf16\", act = \"bf16\", exec = \"native\", math = \"bf16\" }]\n");
  REQUIRE_FALSE(rs.ok());
  CHECK(rs.error().message.find("unknown mode 'verify' (known: batch, decode, prefill)") != std::string::npos);
}

namespace {

met::Expected<RuleSet> load_family(const std::string& extra) {
  const Chain c;
  MemTree t = tree("");
  t.files()["child/KERNEL_FAMILIES.toml"] =
      "[[family]]\nid = \"fam\"\nunit = \"cuda_core\"\nrows_per_launch = 16\nkernels = [\"k_gemv_fast\"]\n" + extra;
  return load_rules(t, c.chain);
}

}  // namespace

TEST_CASE("efficiency_by_rows: shares interpolated in log(rows) per mode, the nearest point outside, `efficiency` for a mode without points") {
  auto rs = load_family("efficiency = 0.7\nefficiency_by_rows = { decode = [[1, 0.2], [16, 0.5]] }\nevidence = \"c.json\"\n");
  REQUIRE_MESSAGE(rs.ok(), (rs.ok() ? "" : rs.error().message));
  const auto& fam = rs->families.at("fam");
  CHECK(*fam.efficiency_at(false, 1) == doctest::Approx(0.2));
  CHECK(*fam.efficiency_at(false, 4) == doctest::Approx(0.35));  // halfway in log(rows)
  CHECK(*fam.efficiency_at(false, 16) == doctest::Approx(0.5));
  CHECK(*fam.efficiency_at(false, 64) == doctest::Approx(0.5));
  CHECK(*fam.efficiency_at(true, 4096) == doctest::Approx(0.7));
  auto bare = load_family("efficiency_by_rows = { prefill = [[128, 0.1]] }\nevidence = \"c.json\"\n");
  REQUIRE(bare.ok());
  CHECK_FALSE(bare->families.at("fam").efficiency_at(false, 1).has_value());
}

TEST_CASE("fixed_us_by_rows: microseconds per instruction interpolated in log(rows) like the efficiency, 0 for a mode without points") {
  auto rs = load_family("efficiency_by_rows = { decode = [[1, 0.8], [16, 0.7]] }\nevidence = \"a.json\"\n"
                        "fixed_us_by_rows = { decode = [[1, 8.0], [16, 12.0]] }\nfixed_evidence = \"b.json\"\n");
  REQUIRE_MESSAGE(rs.ok(), (rs.ok() ? "" : rs.error().message));
  const auto& fam = rs->families.at("fam");
  CHECK(fam.fixed_seconds_at(false, 1) == doctest::Approx(8e-6));
  CHECK(fam.fixed_seconds_at(false, 4) == doctest::Approx(10e-6));  // halfway in log(rows)
  CHECK(fam.fixed_seconds_at(false, 64) == doctest::Approx(12e-6));
  CHECK(fam.fixed_seconds_at(true, 128) == 0.0);
  CHECK(fam.fixed_evidence == "b.json");
}

TEST_CASE("efficiency_by_rows refuses descending rows, shares outside (0, 1], unknown modes and points without evidence; "
          "fixed_us_by_rows refuses negative times, a fixed time without its evidence or without an efficiency") {
  const std::pair<const char*, const char*> cases[] = {
      {"efficiency = 0.5\nevidence = \"a.json\"\nfixed_us_by_rows = { decode = [[1, -1.0]] }\nfixed_evidence = \"b.json\"\n",
       "microseconds >= 0"},
      {"efficiency = 0.5\nevidence = \"a.json\"\nfixed_us_by_rows = { decode = [[1, 8.0]] }\n", "come together"},
      {"efficiency = 0.5\nevidence = \"a.json\"\nfixed_evidence = \"b.json\"\n", "come together"},
      {"evidence = \"unmeasured\"\nfixed_us_by_rows = { decode = [[1, 8.0]] }\nfixed_evidence = \"b.json\"\n",
       "fitted with an efficiency"},
      {"efficiency_by_rows = { decode = [[16, 0.5], [1, 0.2]] }\nevidence = \"c.json\"\n", "rows must ascend"},
      {"efficiency_by_rows = { decode = [[1, 1.5]] }\nevidence = \"c.json\"\n", "efficiency in (0, 1]"},
      {"efficiency_by_rows = { decode = [[0, 0.5]] }\nevidence = \"c.json\"\n", "rows >= 1"},
      {"efficiency_by_rows = { batch = [[1, 0.5]] }\nevidence = \"c.json\"\n", "batch"},
      {"efficiency_by_rows = { decode = [[1, 0.5]] }\nevidence = \"unmeasured\"\n", "needs the evidence"},
  };
  for (const auto& [text, want] : cases) {
    const std::string expected = want;
    CAPTURE(expected);
    auto rs = load_family(text);
    REQUIRE_FALSE(rs.ok());
    CHECK(rs.error().message.find(expected) != std::string::npos);
    CHECK(rs.error().message.find("kernels/child/KERNEL_FAMILIES.toml:") == 0);
  }
}

namespace {

met::Expected<RuleSet> load_evidence(const std::string& evidence, const std::string& child_families_extra = "evidence = \"unmeasured\"\n") {
  const Chain c;
  MemTree t = tree("");
  t.files()["child/KERNEL_FAMILIES.toml"] =
      "[[family]]\nid = \"fam\"\nunit = \"cuda_core\"\nrows_per_launch = 16\nkernels = [\"k_gemv_fast\"]\n" + child_families_extra;
  t.files()["child/EVIDENCE.toml"] = evidence;
  return load_rules(t, c.chain);
}

const std::string kEvidenceHead = "class = \"child\"\nhardware = \"dev\"\n";

}  // namespace

TEST_CASE("a class's EVIDENCE.toml gives its families their measured figures and the leaf its packet overhead") {
  auto rs = load_evidence(kEvidenceHead + "packet_overhead_us = 0.3\npacket_overhead_evidence = \"a.json, b.json\"\n\n[[family]]\n"
                          "id = \"fam\"\nefficiency_by_rows = { decode = [[1, 0.4], [16, 0.8]] }\nevidence = \"a.json, b.json\"\n"
                          "fixed_us_by_rows = { decode = [[1, 5.0]] }\nfixed_evidence = \"a.json, b.json\"\n");
  REQUIRE_MESSAGE(rs.ok(), (rs.ok() ? "" : rs.error().message));
  const auto& fam = rs->families.at("fam");
  CHECK(*fam.efficiency_at(false, 16) == doctest::Approx(0.8));
  CHECK(fam.fixed_seconds_at(false, 1) == doctest::Approx(5e-6));
  CHECK(fam.evidence == "a.json, b.json");
  CHECK(fam.kernels.size() == 4);  // the family of KERNEL_FAMILIES.toml, figures added
  REQUIRE(rs->packet_overhead_us.has_value());
  CHECK(*rs->packet_overhead_us == 0.3);
  CHECK(rs->packet_overhead_evidence == "a.json, b.json");
}

TEST_CASE("EVIDENCE.toml refuses a family the chain lacks, figures a family carries already, another class's file, a family without "
          "its campaigns, an overhead without them and unknown keys (catches evidence silently dropped or doubled)") {
  const std::string fam = "\n[[family]]\nid = \"fam\"\nefficiency = 0.5\nevidence = \"a.json\"\n";
  const std::pair<std::string, std::string> cases[] = {
      {kEvidenceHead + "\n[[family]]\nid = \"nope\"\nefficiency = 0.5\nevidence = \"a.json\"\n", "no family 'nope' in the class chain"},
      {"class = \"base\"\nhardware = \"dev\"\n" + fam, "is not the class of this directory"},
      {kEvidenceHead + "\n[[family]]\nid = \"fam\"\nefficiency = 0.5\nevidence = \"unmeasured\"\n", "needs the evidence"},
      {kEvidenceHead + "packet_overhead_us = 0.3\n" + fam, "packet_overhead_evidence"},
      {kEvidenceHead + "colour = 1\n" + fam, "colour"},
      {kEvidenceHead + fam + fam, "twice"},
  };
  for (const auto& [text, want] : cases) {
    const std::string expected = want;
    CAPTURE(expected);
    auto rs = load_evidence(text);
    REQUIRE_FALSE(rs.ok());
    CHECK(rs.error().message.find(expected) != std::string::npos);
    CHECK(rs.error().message.find("kernels/child/EVIDENCE.toml:") == 0);
  }
  auto doubled = load_evidence(kEvidenceHead + fam, "efficiency = 0.7\nevidence = \"b.json\"\n");
  REQUIRE_FALSE(doubled.ok());
  CHECK(doubled.error().message.find("measured in kernels/child/KERNEL_FAMILIES.toml") != std::string::npos);
}
