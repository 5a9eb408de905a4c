// Every engine family registered in this build keeps the engine-id contract (DESIGN.md section 3): frost's
// families own distinct blocks of 100 ids in [10000, 20000); cuDNN backend engines keep ids below 10000.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "plan/engine.h"

namespace frost::detail {
namespace {

TEST(EngineRegistry, FrostFamiliesOwnDistinctIdBlocks) {
  std::set<int64_t> ids;
  std::set<std::string> names;
  for (const auto& f : registered_engines()) {
    EXPECT_TRUE(names.insert(std::string(f->name())).second) << "two families named " << f->name();
    if (f->engine_class() == EngineClass::CUDNN) continue;
    const int64_t id = f->engine_id();
    EXPECT_GE(id, 10000) << f->name();
    EXPECT_LT(id, 20000) << f->name();
    EXPECT_EQ(id % 100, 0) << f->name() << " id " << id << " is not the start of a block of 100";
    EXPECT_TRUE(ids.insert(id).second) << f->name() << " reuses engine id " << id;
    EXPECT_EQ(find_engine(id), f.get()) << "engine id " << id << " does not find " << f->name();
  }
  EXPECT_TRUE(names.count("reference")) << "the reference engine must always be registered";
}

// The blocks docs/engines.md gives the families, for those built in this configuration.
TEST(EngineRegistry, FamiliesKeepTheirDocumentedIds) {
  const std::map<std::string, int64_t> documented{{"reference", 10000},     {"sm90_sdpa_fwd", 10100},
                                                  {"sm90_gemm", 10200},     {"sm90_sdpa_bwd", 10300},
                                                  {"sm90_norm", 10400},     {"sm90_linear_attention", 10500}};
  for (const auto& f : registered_engines()) {
    if (const auto it = documented.find(std::string(f->name())); it != documented.end()) {
      EXPECT_EQ(f->engine_id(), it->second) << f->name();
    }
  }
}

}  // namespace
}  // namespace frost::detail
