// Every engine family registered in this build keeps the engine-id contract (DESIGN.md section 3): frost's
// families own distinct blocks of 100 ids in [10000, 20000); cuDNN backend engines keep ids below 10000.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace frost::detail
