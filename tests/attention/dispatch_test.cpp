// Registry, default / environment / scoped backend selection, capability refusals, router binding.
#include "cases.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <thread>

namespace cpdit::attention::testing {
namespace {

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(AttentionRegistry, UnknownNameListsAvailableBackends) {
  const std::string msg = message_of([] { backend("sage"); });
  EXPECT_TRUE(contains(msg, "sage") && contains(msg, "flash") && contains(msg, "native")) << msg;
  EXPECT_TRUE(contains(message_of([] { set_attention_backend("nope"); }), "native"));
}

TEST(AttentionRegistry, UnsupportedCombinationNamesBackendAndFeature) {
  Requirements needs;
  needs.mask = MaskKind::boolean;
  const std::string msg = message_of([&] { check_supports(backend("flash"), needs); });
  EXPECT_TRUE(contains(msg, "'flash'") && contains(msg, "boolean") && contains(msg, "native")) << msg;
  EXPECT_NO_THROW(check_supports(backend("native"), needs));

  // The dispatcher refuses it before running.
  const Case c = make_case({1, 8, 8, 2, 2, 16}, MaskKind::boolean, 3);
  ScopedBackend flash("flash");
  Options opts;
  opts.mask = c.mask;
  EXPECT_TRUE(contains(message_of([&] { dispatch(c.q, c.k, c.v, opts); }), "'flash'"));
}

TEST(AttentionRegistry, EnvironmentScopedAndGlobalSelection) {
  // CPDIT_ATTENTION_BACKEND is read on first use, so cli_test checks it in child processes.
  set_attention_backend("native");
  EXPECT_EQ(current_backend().name(), "native");
  {
    ScopedBackend scoped("flash");
    EXPECT_EQ(current_backend().name(), "flash");
    std::string other;  // the override is thread-local
    std::thread([&] { other = current_backend().name(); }).join();
    EXPECT_EQ(other, "native");
  }
  EXPECT_EQ(current_backend().name(), "native");
  set_attention_backend("flash");
  EXPECT_EQ(current_backend().name(), "flash");
}

struct CountingRouter : Router {
  int forwards = 0, backwards = 0;
  Result forward(const Backend& b, const Tensor& q, const Tensor& k, const Tensor& v, const Options& o) override {
    ++forwards;
    return b.forward(q, k, v, o.mask, resolve_scale(o, q.size(3)));
  }
  Grads backward(const Backend& b, const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                 const Result& f, const Options& o) override {
    ++backwards;
    return b.backward(dout, q, k, v, f.out, f.lse, o.mask, resolve_scale(o, q.size(3)));
  }
};

TEST(AttentionDispatch, ShardedCallsGoToTheBoundRouterReplicatedStayLocal) {
  const Case c = make_case({1, 10, 12, 2, 2, 16}, MaskKind::none, 4);
  const Result local = dispatch(c.q, c.k, c.v);
  EXPECT_LE(max_abs_diff(values(local.out), ref_forward(c.ref).out), 2e-5);  // default scale 1/sqrt(D)
  CountingRouter router;
  {
    ScopedRouter bind(&router);
    Result r = dispatch(c.q, c.k, c.v);
    dispatch_backward(c.q, c.q, c.k, c.v, r);
    Options replicated;
    replicated.kv = KvPlacement::replicated;
    dispatch(c.q, c.k, c.v, replicated);
  }
  EXPECT_EQ(router.forwards, 1);
  EXPECT_EQ(router.backwards, 1);
  dispatch(c.q, c.k, c.v);
  EXPECT_EQ(router.forwards, 1);
  EXPECT_EQ(current_router(), nullptr);
}

}  // namespace
}  // namespace cpdit::attention::testing
