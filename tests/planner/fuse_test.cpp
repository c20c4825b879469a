// Greedy fusion on hand-built node lists and rule sets loaded from an in-memory FUSIONS.toml: the
// order rules take nodes in, gaps for what is left, the candidates recorded on a gap and why, and
// the mode and row limits of a rule.
#include <doctest/doctest.h>

#include "planner/plan.hpp"

using met::Format;
using met::MemTree;
using met::planner::fuse;
using met::planner::Group;
using met::planner::Mode;
using met::planner::RuleSet;
using met::model::Node;

namespace {

Node node(const std::string& op, const std::string& role = "", std::optional<Format> weight = std::nullopt) {
  Node n;
  n.op = op;
  n.role = role;
  n.weight_format = weight;
  if (weight) n.weight = op + "." + role + ".weight";
  return n;
}

std::string rule(const std::string& id, const std::string& pattern, const std::string& kernel, int priority,
                 const std::string& modes = "[\"decode\", \"batch\"]", const std::string& rows = "[1, 16]",
                 const std::string& formats = "[{ weight = \"bf16\", act = \"bf16\", exec = \"native\", math = \"bf16\" },"
                                              " { act = \"bf16\", exec = \"native\", math = \"bf16\" }]") {
  return "[[rule]]\nid = \"" + id + "\"\npattern = " + pattern + "\nkernel = \"" + kernel + "\"\nfamily = \"fam\"\nmodes = " +
         modes + "\nrows = " + rows + "\npriority = " + std::to_string(priority) + "\nformats = " + formats + "\n\n";
}

// Rules of a one-class chain; every kernel named in `kernels` is in family "fam".
met::Expected<RuleSet> try_load(const std::string& fusions, const std::string& kernels) {
  MemTree tree({{"test/FUSIONS.toml", fusions},
                {"test/KERNEL_FAMILIES.toml",
                 "[[family]]\nid = \"fam\"\nunit = \"cuda_core\"\nrows_per_launch = 16\nkernels = " + kernels +
                     "\nevidence = \"unmeasured\"\n"}});
  met::avail::ClassInfo info;
  info.id = "test";
  met::avail::ClassChain chain;
  chain.chain = {&info};
  return met::planner::load_rules(tree, chain);
}

RuleSet load(const std::string& fusions, const std::string& kernels) {
  auto rs = try_load(fusions, kernels);
  REQUIRE_MESSAGE(rs.ok(), (rs.ok() ? "" : rs.error().message));
  return std::move(rs).value();
}

met::avail::Availability available(const std::vector<std::string>& names) {
  met::avail::Availability a;
  a.klass = "test";
  a.device = "dev";
  for (const auto& n : names) {
    met::avail::KernelStatus st;
    st.name = n;
    st.available = true;
    st.file = "kernels/test/k.cuh";
    st.line = 1;
    a.kernels[n] = st;
  }
  return a;
}

// "rule{0,1} gap{2}": groups in node order.
std::string shape(const std::vector<Group>& groups) {
  std::string s;
  for (const auto& g : groups) {
    if (!s.empty()) s += " ";
    s += g.gap ? "gap" : g.rule;
    s += "{";
    for (std::size_t i = 0; i < g.nodes.size(); ++i) s += (i ? "," : "") + std::to_string(g.nodes[i]);
    s += "}";
  }
  return s;
}

const std::vector<Node> kNormLinearResidual = {node("rmsnorm", "attn_norm", Format::bf16), node("linear", "o", Format::bf16),
                                               node("residual")};

}  // namespace

TEST_CASE("the higher-priority rule takes contested nodes first, whatever the file order (catches file-order fusion)") {
  const std::string kernels = "[\"k_norm_o\", \"k_o_res\", \"k_res\"]";
  const auto avail = available({"k_norm_o", "k_o_res", "k_res"});
  {
    // Listed low first: priority, not file order, decides.
    const RuleSet rs = load(rule("o_res", "[\"linear:o\", \"residual\"]", "k_o_res", 50) +
                                rule("norm_o", "[\"rmsnorm\", \"linear:o\"]", "k_norm_o", 100) +
                                rule("res", "[\"residual\"]", "k_res", 1),
                            kernels);
    REQUIRE(rs.rules.size() == 3);
    CHECK(rs.rules[0].id == "norm_o");
    CHECK(rs.rules[1].id == "o_res");
    CHECK(rs.rules[2].id == "res");
    CHECK(shape(fuse(kNormLinearResidual, rs, avail, Mode::decode, 1, Format::bf16)) == "norm_o{0,1} res{2}");
  }
  {
    const RuleSet rs = load(rule("norm_o", "[\"rmsnorm\", \"linear:o\"]", "k_norm_o", 50) +
                                rule("o_res", "[\"linear:o\", \"residual\"]", "k_o_res", 100),
                            kernels);
    CHECK(shape(fuse(kNormLinearResidual, rs, avail, Mode::decode, 1, Format::bf16)) == "gap{0} o_res{1,2}");
  }
}

TEST_CASE("rules of equal priority are tried by id (catches an unstable or file-ordered tie-break)") {
  const std::string kernels = "[\"k_a\", \"k_b\"]";
  const auto avail = available({"k_a", "k_b"});
  const RuleSet rs = load(rule("zeta", "[\"linear:o\", \"residual\"]", "k_b", 100) +
                              rule("alpha", "[\"rmsnorm\", \"linear:o\"]", "k_a", 100),
                          kernels);
  REQUIRE(rs.rules.size() == 2);
  CHECK(rs.rules[0].id == "alpha");
  const auto groups = fuse(kNormLinearResidual, rs, avail, Mode::decode, 1, Format::bf16);
  CHECK(shape(groups) == "alpha{0,1} gap{2}");
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].kernels == std::vector<std::string>{"k_a"});
  CHECK(groups[0].family == "fam");
  CHECK(groups[0].unit == "cuda_core");
}

TEST_CASE("a rule takes the leftmost non-overlapping windows") {
  const RuleSet rs = load(rule("pair", "[\"linear\", \"linear\"]", "k_pair", 10), "[\"k_pair\"]");
  const std::vector<Node> nodes = {node("linear", "q", Format::bf16), node("linear", "k", Format::bf16),
                                   node("linear", "v", Format::bf16)};
  CHECK(shape(fuse(nodes, rs, available({"k_pair"}), Mode::decode, 1, Format::bf16)) == "pair{0,1} gap{2}");
  const std::vector<Node> four = {nodes[0], nodes[1], nodes[2], node("linear", "o", Format::bf16)};
  CHECK(shape(fuse(four, rs, available({"k_pair"}), Mode::decode, 1, Format::bf16)) == "pair{0,1} pair{2,3}");
}

TEST_CASE("a role in a pattern restricts the match; no role matches any role") {
  const RuleSet rs = load(rule("o_only", "[\"linear:o\"]", "k_o", 20) + rule("any_linear", "[\"linear\"]", "k_any", 10),
                          "[\"k_o\", \"k_any\"]");
  const std::vector<Node> nodes = {node("linear", "qkv", Format::bf16), node("linear", "o", Format::bf16)};
  CHECK(shape(fuse(nodes, rs, available({"k_o", "k_any"}), Mode::decode, 1, Format::bf16)) == "any_linear{0} o_only{1}");
}

TEST_CASE("a node no rule covers becomes a one-node placeholder group") {
  const RuleSet rs = load(rule("norm", "[\"rmsnorm\"]", "k_norm", 10), "[\"k_norm\"]");
  const std::vector<Node> nodes = {node("rmsnorm", "final_norm", Format::bf16), node("linear", "lm_head", Format::bf16),
                                   node("argmax")};
  const auto groups = fuse(nodes, rs, available({"k_norm"}), Mode::decode, 1, Format::bf16);
  REQUIRE(shape(groups) == "norm{0} gap{1} gap{2}");
  const Group& head = groups[1];
  CHECK(head.rule.empty());
  CHECK(head.kernels.empty());
  CHECK(head.family.empty());
  CHECK(head.unit == "cuda_core");  // a gap runs as reference ops
  CHECK(head.blocked.empty());      // no candidate matched
  REQUIRE(head.exec.has_value());
  CHECK(head.exec->weight == "bf16");
  CHECK(head.exec->how == "no kernel");     // nothing covers the op: not a format the class lacks
  CHECK_FALSE(groups[2].exec.has_value());  // argmax has no weight
}

TEST_CASE("a candidate whose kernel is unavailable is recorded on the gap with its why and needs") {
  const RuleSet rs = load(rule("norm_o_wgmma", "[\"rmsnorm\", \"linear:o\"]", "k_wgmma", 100) +
                              rule("norm", "[\"rmsnorm\"]", "k_norm", 10),
                          "[\"k_wgmma\", \"k_norm\"]");
  auto avail = available({"k_norm"});
  met::avail::KernelStatus st;
  st.name = "k_wgmma";
  st.available = false;
  st.file = "kernels/test/k.cuh";
  st.line = 7;
  st.why = "guard 'MET_HAS_WGMMA' at kernels/test/k.cuh:6 is false: needs wgmma, which dev lacks";
  st.needs = {"wgmma"};
  avail.kernels["k_wgmma"] = st;

  const auto groups = fuse(kNormLinearResidual, rs, avail, Mode::decode, 1, Format::bf16);
  REQUIRE(shape(groups) == "norm{0} gap{1} gap{2}");
  CHECK(groups[0].blocked.empty());
  const Group& o = groups[1];
  REQUIRE(o.blocked.size() == 1);
  CHECK(o.blocked[0].rule == "norm_o_wgmma");
  CHECK(o.blocked[0].kernels == std::vector<std::string>{"k_wgmma"});
  CHECK(o.blocked[0].why.find("k_wgmma") != std::string::npos);
  CHECK(o.blocked[0].why.find("needs wgmma") != std::string::npos);
  CHECK(o.blocked[0].needs == std::vector<std::string>{"wgmma"});
  CHECK_FALSE(o.blocked[0].format);
  REQUIRE(o.exec.has_value());
  CHECK(o.exec->how == "no kernel");  // a kernel is missing, the format pair itself has a path
  CHECK(groups[2].blocked.empty());
}

TEST_CASE("a kernel no source defines blocks its rule with 'not defined'") {
  const RuleSet rs = load(rule("o", "[\"linear:o\"]", "k_gone", 10), "[\"k_gone\"]");
  const auto groups = fuse({node("linear", "o", Format::bf16)}, rs, available({}), Mode::decode, 1, Format::bf16);
  REQUIRE(groups.size() == 1);
  REQUIRE(groups[0].gap);
  REQUIRE(groups[0].blocked.size() == 1);
  CHECK(groups[0].blocked[0].why.find("not defined") != std::string::npos);
}

TEST_CASE("a weight format no entry lists is a format block and no path, never an upcast") {
  const RuleSet rs = load(rule("o", "[\"linear:o\"]", "k_o", 10), "[\"k_o\"]");
  const auto groups = fuse({node("linear", "o", Format::fp8_e4m3)}, rs, available({"k_o"}), Mode::decode, 1, Format::bf16);
  REQUIRE(groups.size() == 1);
  const Group& g = groups[0];
  CHECK(g.gap);
  REQUIRE(g.blocked.size() == 1);
  CHECK(g.blocked[0].format);
  CHECK(g.blocked[0].why.find("fp8-e4m3 x bf16") != std::string::npos);
  REQUIRE(g.exec.has_value());
  CHECK(g.exec->weight == "fp8-e4m3");
  CHECK(g.exec->how == "no path");
}

TEST_CASE("the exec of a group is the matched entry: emulate for fp8, native for bf16") {
  const std::string formats =
      "[{ weight = \"bf16\", act = \"bf16\", exec = \"native\", math = \"bf16\" },"
      " { weight = \"fp8-e4m3\", act = \"bf16\", exec = \"emulate\", math = \"bf16\" }]";
  const RuleSet rs = load(rule("o", "[\"linear:o\"]", "k_o", 10, "[\"decode\"]", "[1, 1]", formats), "[\"k_o\"]");
  const auto fp8 = fuse({node("linear", "o", Format::fp8_e4m3)}, rs, available({"k_o"}), Mode::decode, 1, Format::bf16);
  REQUIRE(fp8.size() == 1);
  REQUIRE_FALSE(fp8[0].gap);
  REQUIRE(fp8[0].exec.has_value());
  CHECK(fp8[0].exec->weight == "fp8-e4m3");
  CHECK(fp8[0].exec->act == "bf16");
  CHECK(fp8[0].exec->how == "emulate");
  CHECK(fp8[0].exec->math == "bf16");
  const auto bf = fuse({node("linear", "o", Format::bf16)}, rs, available({"k_o"}), Mode::decode, 1, Format::bf16);
  REQUIRE(bf[0].exec.has_value());
  CHECK(bf[0].exec->how == "native");
}

TEST_CASE("a weightless node needs an entry of its activation format") {
  const RuleSet rs = load(rule("res", "[\"residual\"]", "k_res", 10), "[\"k_res\"]");
  CHECK(shape(fuse({node("residual")}, rs, available({"k_res"}), Mode::decode, 1, Format::bf16)) == "res{0}");
  const auto f16 = fuse({node("residual")}, rs, available({"k_res"}), Mode::decode, 1, Format::f16);
  REQUIRE(f16.size() == 1);
  CHECK(f16[0].gap);
  REQUIRE(f16[0].blocked.size() == 1);
  CHECK(f16[0].blocked[0].format);
}

TEST_CASE("a rule applies only in its modes and within its row range (catches an off-by-one at rows max)") {
  const RuleSet rs = load(rule("o", "[\"linear:o\"]", "k_o", 10, "[\"decode\", \"batch\"]", "[2, 16]"), "[\"k_o\"]");
  const auto avail = available({"k_o"});
  const std::vector<Node> nodes = {node("linear", "o", Format::bf16)};
  CHECK(shape(fuse(nodes, rs, avail, Mode::batch, 16, Format::bf16)) == "o{0}");
  CHECK(shape(fuse(nodes, rs, avail, Mode::batch, 2, Format::bf16)) == "o{0}");
  CHECK(shape(fuse(nodes, rs, avail, Mode::batch, 17, Format::bf16)) == "gap{0}");
  CHECK(shape(fuse(nodes, rs, avail, Mode::decode, 1, Format::bf16)) == "gap{0}");
  CHECK(shape(fuse(nodes, rs, avail, Mode::prefill, 8, Format::bf16)) == "gap{0}");
}

TEST_CASE("a lower-priority rule still covers what a higher one left (catches stopping at the first rule)") {
  const RuleSet rs = load(rule("big", "[\"rmsnorm\", \"linear:o\", \"residual\"]", "k_big", 100, "[\"decode\"]", "[1, 1]") +
                              rule("o", "[\"linear:o\"]", "k_o", 10) + rule("norm", "[\"rmsnorm\"]", "k_norm", 10),
                          "[\"k_big\", \"k_o\", \"k_norm\"]");
  const auto avail = available({"k_big", "k_o", "k_norm"});
  const std::vector<Node> two = {kNormLinearResidual[0], kNormLinearResidual[1], kNormLinearResidual[2], kNormLinearResidual[0],
                                 kNormLinearResidual[1]};
  CHECK(shape(fuse(two, rs, avail, Mode::decode, 1, Format::bf16)) == "big{0,1,2} norm{3} o{4}");
  // In batch mode the big rule does not apply.
  CHECK(shape(fuse(two, rs, avail, Mode::batch, 4, Format::bf16)) == "norm{0} o{1} gap{2} norm{3} o{4}");
}

TEST_CASE("a rule's requires blocks a window whose params its bodies do not handle, naming the values; a lower rule or a gap takes it (catches an emit the interpreter would refuse at load)") {
  const std::string req = rule("flash", "[\"attention\"]", "k_flash", 20) + "requires = [\"head_dim == 64 || head_dim == 128\"]\n\n";
  const RuleSet rs = load(req, "[\"k_flash\"]");
  auto attn = [](double hd) {
    Node n = node("attention");
    n.params = {{"heads", 8}, {"kv_heads", 2}, {"head_dim", hd}, {"v_head_dim", hd}};
    return n;
  };
  const auto ok = fuse({attn(128)}, rs, available({"k_flash"}), Mode::decode, 1, Format::bf16);
  REQUIRE(ok.size() == 1);
  CHECK(!ok[0].gap);
  const auto gap = fuse({attn(256)}, rs, available({"k_flash"}), Mode::decode, 1, Format::bf16);
  REQUIRE(gap.size() == 1);
  CHECK(gap[0].gap);
  REQUIRE(gap[0].blocked.size() == 1);
  CHECK(gap[0].blocked[0].why == "rule 'flash' requires head_dim == 64 || head_dim == 128 (head_dim = 256)");
  CHECK(gap[0].blocked[0].kernels == std::vector<std::string>{"k_flash"});
}

TEST_CASE("a requirement naming a param no op of the pattern has is refused where the rule is") {
  const std::string bad = rule("flash", "[\"attention\"]", "k_flash", 20) + "requires = [\"head_dims == 64\"]\n\n";
  auto rs = try_load(bad, "[\"k_flash\"]");
  REQUIRE(!rs.ok());
  CHECK(rs.error().message.find("'head_dims == 64' reads 'head_dims', which no op of the pattern has") != std::string::npos);
  CHECK(rs.error().message.find("test/FUSIONS.toml") != std::string::npos);
}

TEST_CASE(
    "a gap whose rule lists the format pair but lacks its kernel is 'no kernel', one whose rules lack the pair 'no path' "
    "(catches 'no path' printed for a missing kernel)") {
  const RuleSet rs = load(rule("o", "[\"linear:o\"]", "k_o", 10), "[\"k_o\"]");
  const auto missing_kernel = fuse({node("linear", "o", Format::bf16)}, rs, available({}), Mode::decode, 1, Format::bf16);
  REQUIRE(missing_kernel.size() == 1);
  REQUIRE(missing_kernel[0].exec.has_value());
  CHECK(missing_kernel[0].exec->how == "no kernel");
  const auto missing_pair = fuse({node("linear", "o", Format::int8)}, rs, available({"k_o"}), Mode::decode, 1, Format::bf16);
  REQUIRE(missing_pair.size() == 1);
  REQUIRE(missing_pair[0].exec.has_value());
  CHECK(missing_pair[0].exec->how == "no path");
}

namespace {
// fp8 weights on three paths: weight-only emulation, the kernel quantising bf16 activations, and
// nvfp4 weight-only emulation (the W4A16 path a W4A4 checkpoint must not take).
const std::string kPathFormats =
    "[{ weight = \"fp8-e4m3\", act = \"bf16\", quantize_act = \"fp8-e4m3\", exec = \"native\", math = \"fp8\" },"
    " { weight = \"nvfp4\", act = \"bf16\", exec = \"emulate\", math = \"bf16\" }]";
}  // namespace

TEST_CASE(
    "a path that quantises activations on the fly is W8A8 and says so, not a bf16-activation path (catches the quantisation left "
    "out of the exec)") {
  const RuleSet rs = load(rule("o", "[\"linear:o\"]", "k_o", 10, "[\"decode\"]", "[1, 1]", kPathFormats), "[\"k_o\"]");
  const auto groups = fuse({node("linear", "o", Format::fp8_e4m3)}, rs, available({"k_o"}), Mode::decode, 1, Format::bf16);
  REQUIRE(groups.size() == 1);
  REQUIRE_FALSE(groups[0].gap);
  REQUIRE(groups[0].exec.has_value());
  const auto& e = *groups[0].exec;
  CHECK(e.act == "bf16");
  CHECK(e.act_math == "fp8-e4m3");
  CHECK(e.quantizes_act());
  CHECK(e.path == "W8A8");
  CHECK(e.math == "fp8");
}

TEST_CASE(
    "a node whose checkpoint fixes nvfp4 activations is planned W4A4: a weight-only nvfp4 path is no path for it (catches W4A4 "
    "planned as weight-only)") {
  const RuleSet rs = load(rule("o", "[\"linear:o\"]", "k_o", 10, "[\"decode\"]", "[1, 1]", kPathFormats), "[\"k_o\"]");
  Node weight_only = node("linear", "o", Format::nvfp4);
  const auto w4a16 = fuse({weight_only}, rs, available({"k_o"}), Mode::decode, 1, Format::bf16);
  REQUIRE(w4a16.size() == 1);
  CHECK_FALSE(w4a16[0].gap);
  REQUIRE(w4a16[0].exec.has_value());
  CHECK(w4a16[0].exec->path == "W4A16");
  CHECK_FALSE(w4a16[0].exec->quantizes_act());

  Node w4a4 = weight_only;
  w4a4.act_format = Format::nvfp4;
  const auto groups = fuse({w4a4}, rs, available({"k_o"}), Mode::decode, 1, Format::bf16);
  REQUIRE(groups.size() == 1);
  const Group& g = groups[0];
  CHECK(g.gap);
  REQUIRE(g.exec.has_value());
  CHECK(g.exec->path == "W4A4");
  CHECK(g.exec->how == "no path");
  REQUIRE(g.blocked.size() == 1);
  CHECK(g.blocked[0].format);
  CHECK(g.blocked[0].pair == "nvfp4 x nvfp4");
  CHECK(g.blocked[0].why.find("fp8-e4m3 x bf16 (quantised to fp8-e4m3)") != std::string::npos);

  // A path computing in the declared format takes it.
  const std::string w4a4_formats =
      "[{ weight = \"nvfp4\", act = \"bf16\", quantize_act = \"nvfp4\", exec = \"native\", math = \"fp4\" }]";
  const RuleSet native = load(rule("o", "[\"linear:o\"]", "k_o", 10, "[\"decode\"]", "[1, 1]", w4a4_formats), "[\"k_o\"]");
  const auto ran = fuse({w4a4}, native, available({"k_o"}), Mode::decode, 1, Format::bf16);
  REQUIRE(ran.size() == 1);
  CHECK_FALSE(ran[0].gap);
  CHECK(ran[0].exec->path == "W4A4");
}

TEST_CASE(
    "an entry whose math is narrower than the activations it reads must name quantize_act (catches a W8A8 path shown as keeping "
    "bf16 activations)") {
  const std::string silent = "[{ weight = \"fp8-e4m3\", act = \"bf16\", exec = \"native\", math = \"fp8\" }]";
  auto rs = try_load(rule("o", "[\"linear:o\"]", "k_o", 10, "[\"decode\"]", "[1, 1]", silent), "[\"k_o\"]");
  REQUIRE_FALSE(rs.ok());
  CHECK(rs.error().message.find("math 'fp8' on bf16 activations") != std::string::npos);
  CHECK(rs.error().message.find("quantize_act") != std::string::npos);
  const std::string wrong =
      "[{ weight = \"fp8-e4m3\", act = \"bf16\", quantize_act = \"nvfp4\", exec = \"native\", math = \"fp8\" }]";
  CHECK_FALSE(try_load(rule("o", "[\"linear:o\"]", "k_o", 10, "[\"decode\"]", "[1, 1]", wrong), "[\"k_o\"]").ok());
  const std::string itself =
      "[{ weight = \"fp8-e4m3\", act = \"bf16\", quantize_act = \"bf16\", exec = \"native\", math = \"bf16\" }]";
  CHECK_FALSE(try_load(rule("o", "[\"linear:o\"]", "k_o", 10, "[\"decode\"]", "[1, 1]", itself), "[\"k_o\"]").ok());
}
