// Tree-walking evaluator of parsed templates. Scopes follow jinja2: a for loop's body gets a fresh
// scope per iteration (a `set` inside does not outlive it), `if` opens none, a macro call gets one
// over the scope it was defined in; namespace() objects are the one thing assignments mutate.
#include "text/jinja.hpp"

#include <limits>
#include <map>

#include "text/jinja_builtins.hpp"
#include "text/jinja_lexer.hpp"
#include "text/jinja_parser.hpp"

namespace met {

using namespace met::jinja;

struct Template::Parsed {
  std::string source;  // normalized
  Body body;
};

namespace {

constexpr const char* kBodyName = "\x01body";  // must match the parser's placeholder

struct Scope {
  std::map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { normal, break_, continue_ };

// Macro calls nest at most this deep (Python stops a runaway recursion with RecursionError; this
// engine would run off the stack). Real templates recurse into a tool schema's nesting, far less.
constexpr int kMaxMacroDepth = 128;

struct Interpreter {
  int macro_depth = 0;

  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      return eval_inner(e, scope);
    } catch (RenderError& err) {
      if (err.offset < 0) err.offset = e.offset;
      throw;
    }
  }

  Args eval_args(const Expr& e, const ScopePtr& scope, std::size_t first) {
    Args a;
    for (std::size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i], scope));
    for (const auto& [k, v] : e.kwargs) a.keywords.emplace_back(k, eval(*v, scope));
    return a;
  }

  Value eval_inner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::constant: return e.value;
      case Expr::Kind::name: {
        const Value* v = scope->find(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::attr: return get_attr(eval(*e.args[0], scope), e.name);
      case Expr::Kind::item: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
      case Expr::Kind::slice:
        return get_slice(eval(*e.args[0], scope), eval(*e.args[1], scope), eval(*e.args[2], scope), eval(*e.args[3], scope));
      case Expr::Kind::call: {
        Value callee = eval(*e.args[0], scope);
        Args a = eval_args(e, scope, 1);
        return call_value(callee, a);
      }
      case Expr::Kind::filter: {
        Value subject = eval(*e.args[0], scope);
        Args a = eval_args(e, scope, 1);
        return apply_filter(e.name, subject, a);
      }
      case Expr::Kind::test: {
        Value subject = eval(*e.args[0], scope);
        Args a = eval_args(e, scope, 1);
        return Value(apply_test(e.name, subject, a) != e.negated);
      }
      case Expr::Kind::unary: {
        Value v = eval(*e.args[0], scope);
        require_defined(v);
        if (!v.is_number()) throw RenderError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
        if (e.name == "+") return v.is_float() ? v : Value(v.as_int());
        if (v.is_float()) return Value(-v.as_double());
        if (v.as_int() == std::numeric_limits<std::int64_t>::min())
          throw RenderError("integer overflow in unary - (met's template integers are 64-bit)");
        return Value(-v.as_int());
      }
      case Expr::Kind::binary: return binary_op(e.name, eval(*e.args[0], scope), eval(*e.args[1], scope));
      case Expr::Kind::logical_and: {
        Value l = eval(*e.args[0], scope);
        return l.truthy() ? eval(*e.args[1], scope) : l;
      }
      case Expr::Kind::logical_or: {
        Value l = eval(*e.args[0], scope);
        return l.truthy() ? l : eval(*e.args[1], scope);
      }
      case Expr::Kind::logical_not: return Value(!eval(*e.args[0], scope).truthy());
      case Expr::Kind::compare: {
        Value l = eval(*e.args[0], scope);
        for (std::size_t i = 0; i < e.ops.size(); ++i) {
          Value r = eval(*e.args[i + 1], scope);
          const std::string& op = e.ops[i];
          bool ok;
          if (op == "==") ok = equals(l, r);
          else if (op == "!=") ok = !equals(l, r);
          else if (op == "in") ok = contains(r, l);
          else if (op == "notin") ok = !contains(r, l);
          else {
            require_defined(l);
            require_defined(r);
            if (op == "<") ok = less(l, r);
            else if (op == ">") ok = less(r, l);
            else if (op == "<=") ok = less(l, r) || equals(l, r);
            else ok = less(r, l) || equals(l, r);
          }
          if (!ok) return Value(false);
          l = std::move(r);
        }
        return Value(true);
      }
      case Expr::Kind::cond:
        if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
        if (e.has_else) return eval(*e.args[2], scope);
        return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
      case Expr::Kind::list:
      case Expr::Kind::tuple: {
        std::vector<Value> items;
        for (const auto& a : e.args) items.push_back(eval(*a, scope));
        return Value::list(std::move(items), e.kind == Expr::Kind::tuple);
      }
      case Expr::Kind::dict: {
        std::vector<std::pair<Value, Value>> items;
        for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i], scope);
          Value v = eval(*e.args[i + 1], scope);
          bool replaced = false;
          for (auto& kv : items)
            if (equals(kv.first, k)) {
              kv.second = v;
              replaced = true;
            }
          if (!replaced) items.emplace_back(std::move(k), std::move(v));
        }
        return Value::dict(std::move(items));
      }
    }
    return Value();
  }

  void assign(const Stmt& s, const ScopePtr& scope, Value v) {
    if (s.targets.size() == 1) {
      scope->vars[s.targets[0]] = std::move(v);
      return;
    }
    unpack(s.targets, v, scope);
  }

  void unpack(const std::vector<std::string>& targets, const Value& v, const ScopePtr& scope) {
    std::vector<Value> items = iterate(v);
    if (items.size() != targets.size())
      throw RenderError(items.size() > targets.size()
                            ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
                            : "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                                  std::to_string(items.size()) + ")");
    for (std::size_t i = 0; i < targets.size(); ++i) scope->vars[targets[i]] = items[i];
  }

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const auto& s : body) {
      Flow f = exec(*s, scope, out);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
    try {
      return exec_inner(s, scope, out);
    } catch (RenderError& err) {
      if (err.offset < 0) err.offset = s.offset;
      throw;
    }
  }

  Value filtered_body(const Stmt& s, const ScopePtr& scope, std::string body_text) {
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    inner->vars[kBodyName] = Value(std::move(body_text));
    return eval(*s.filter, inner);
  }

  Flow exec_inner(const Stmt& s, const ScopePtr& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::data: out += s.text; return Flow::normal;
      case Stmt::Kind::print: out += eval(*s.exprs[0], scope).str(); return Flow::normal;
      case Stmt::Kind::if_:
        for (std::size_t i = 0; i < s.exprs.size(); ++i)
          if (eval(*s.exprs[i], scope).truthy()) return exec_body(s.bodies[i], scope, out);
        if (s.has_else) return exec_body(s.bodies.back(), scope, out);
        return Flow::normal;
      case Stmt::Kind::for_: return exec_for(s, scope, out);
      case Stmt::Kind::set:
        if (!s.ns_attr.empty()) {
          const Value* ns = scope->find(s.targets[0]);
          if (!ns || !ns->is_object() || !ns->as_object().assignable)
            throw RenderError("cannot assign attribute on non-namespace object");
          ns->as_object().attrs[s.ns_attr] = eval(*s.exprs[0], scope);
          return Flow::normal;
        }
        assign(s, scope, eval(*s.exprs[0], scope));
        return Flow::normal;
      case Stmt::Kind::set_block: {
        std::string text;
        exec_body(s.bodies[0], scope, text);
        scope->vars[s.targets[0]] = s.filter ? filtered_body(s, scope, std::move(text)) : Value(std::move(text));
        return Flow::normal;
      }
      case Stmt::Kind::filter_block: {
        std::string text;
        exec_body(s.bodies[0], scope, text);
        out += filtered_body(s, scope, std::move(text)).str();
        return Flow::normal;
      }
      case Stmt::Kind::macro: {
        const Stmt* def = &s;
        // Weak: the defining scope holds the macro, so a strong capture would be a cycle.
        std::weak_ptr<Scope> closure = scope;
        Interpreter* self = this;
        Value fn = Value::function(s.name, [def, closure, self](Args& a) {
          if (self->macro_depth >= kMaxMacroDepth)
            throw RenderError("maximum recursion depth exceeded: macro calls nest deeper than " + std::to_string(kMaxMacroDepth));
          ++self->macro_depth;
          struct Leave {
            int& depth;
            ~Leave() { --depth; }
          } leave{self->macro_depth};
          auto local = std::make_shared<Scope>();
          local->parent = closure.lock();
          if (!local->parent) throw RenderError("macro '" + def->name + "' called after its scope ended");
          std::vector<Value> varargs;
          for (std::size_t i = 0; i < a.positional.size(); ++i) {
            if (i < def->params.size())
              local->vars[def->params[i]] = a.positional[i];
            else
              varargs.push_back(a.positional[i]);
          }
          std::vector<std::pair<Value, Value>> kwargs;
          for (auto& [k, v] : a.keywords) {
            bool is_param = false;
            for (const auto& p : def->params) is_param = is_param || p == k;
            if (is_param)
              local->vars[k] = v;
            else
              kwargs.emplace_back(Value(k), v);
          }
          for (std::size_t i = 0; i < def->params.size(); ++i) {
            if (local->vars.count(def->params[i])) continue;
            local->vars[def->params[i]] = def->defaults[i]
                                              ? self->eval(*def->defaults[i], local)
                                              : Value::undefined("parameter '" + def->params[i] + "' was not provided");
          }
          local->vars["varargs"] = Value::list(std::move(varargs), /*tuple=*/true);
          local->vars["kwargs"] = Value::dict(std::move(kwargs));
          std::string text;
          self->exec_body(def->bodies[0], local, text);
          return Value(std::move(text));
        });
        scope->vars[s.name] = fn;
        return Flow::normal;
      }
      case Stmt::Kind::break_: return Flow::break_;
      case Stmt::Kind::continue_: return Flow::continue_;
    }
    return Flow::normal;
  }

  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    Value iterable = eval(*s.exprs[0], scope);
    std::vector<Value> all = iterate(iterable);
    std::vector<Value> items;
    if (s.exprs.size() > 1) {
      // `for x in seq if cond`: the filter sees the loop target, not `loop`.
      for (auto& item : all) {
        auto probe = std::make_shared<Scope>();
        probe->parent = scope;
        if (s.targets.size() == 1) probe->vars[s.targets[0]] = item;
        else unpack(s.targets, item, probe);
        if (eval(*s.exprs[1], probe).truthy()) items.push_back(item);
      }
    } else {
      items = std::move(all);
    }
    auto n = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < n; ++i) {
      auto iter = std::make_shared<Scope>();
      iter->parent = scope;
      auto loop = std::make_shared<ObjectData>();
      loop->type_name = "LoopContext";
      auto& a = loop->attrs;
      a["index0"] = Value(i);
      a["index"] = Value(i + 1);
      a["revindex"] = Value(n - i);
      a["revindex0"] = Value(n - i - 1);
      a["first"] = Value(i == 0);
      a["last"] = Value(i == n - 1);
      a["length"] = Value(n);
      a["depth"] = Value(1);
      a["depth0"] = Value(0);
      a["previtem"] = i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined("there is no previous item");
      a["nextitem"] = i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value::undefined("there is no next item");
      a["cycle"] = Value::function("cycle", [i](Args& args) -> Value {
        if (args.positional.empty()) throw RenderError("no items for cycling given");
        return args.positional[static_cast<std::size_t>(i) % args.positional.size()];
      });
      iter->vars["loop"] = Value::object(loop);
      if (s.targets.size() == 1) iter->vars[s.targets[0]] = items[static_cast<std::size_t>(i)];
      else unpack(s.targets, items[static_cast<std::size_t>(i)], iter);
      Flow f = exec_body(s.bodies[0], iter, out);
      if (f == Flow::break_) break;
    }
    if (n == 0 && s.has_else) return exec_body(s.bodies[1], scope, out);
    return Flow::normal;
  }
};

}  // namespace

Expected<Template> Template::parse(std::string_view source, const std::string& display) {
  auto parsed = std::make_shared<Parsed>();
  parsed->source = normalize_source(source);
  MET_TRY(auto tokens, tokenize(parsed->source, display));
  MET_TRY(parsed->body, jinja::parse(tokens, parsed->source, display));
  Template t;
  t.parsed_ = std::move(parsed);
  t.display_ = std::make_shared<const std::string>(display);
  return t;
}

namespace {

template <class Json>
Expected<std::shared_ptr<Scope>> root_scope(const Json& context, const std::string& display) {
  if (!context.is_object() && !context.is_null()) return fail(display + ": render context must be a json object");
  auto globals = std::make_shared<Scope>();
  globals->vars = make_globals();
  auto root = std::make_shared<Scope>();
  root->parent = globals;
  if (!context.is_object()) return root;
  try {
    for (const auto& [k, v] : context.items()) root->vars[k] = from_json(v);
  } catch (const RenderError& e) {
    return fail(display + ": render context: " + e.what());
  }
  return root;
}

}  // namespace

Expected<std::string> Template::render(const nlohmann::json& context) const {
  MET_TRY(auto root, root_scope(context, display()));
  return render_scope(root);
}

Expected<std::string> Template::render(const nlohmann::ordered_json& context) const {
  MET_TRY(auto root, root_scope(context, display()));
  return render_scope(root);
}

Expected<std::string> Template::render_scope(const std::shared_ptr<void>& root_any) const {
  auto root = std::static_pointer_cast<Scope>(root_any);
  Interpreter in;
  std::string out;
  try {
    in.exec_body(parsed_->body, root, out);
  } catch (const RenderError& e) {
    return fail(display() + ":" + location(parsed_->source, e.offset < 0 ? 0 : e.offset) + ": " + e.what());
  }
  return out;
}

}  // namespace met
