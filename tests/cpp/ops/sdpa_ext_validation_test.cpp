// Validation of sdpa's ragged, cumulative-length, paged, block-mask and dropout inputs: every error
// names the node, the attribute and the offending value.
#include <functional>
#include <nlohmann/json.hpp>

#include "ops/sdpa/sdpa_node.h"
#include "test_util.h"

namespace frost::test {
namespace {

using graph::SDPA_attributes;
using E = error_code_t;
const DataType_t kI32 = DataType_t::INT32, kI64 = DataType_t::INT64, kF32 = DataType_t::FLOAT;

struct Tensors {
  TensorPtr q, k, v, o, stats;
};
using Setter = std::function<void(graph::Graph&, SDPA_attributes&)>;
using After = std::function<void(graph::Graph&, Tensors&)>;

struct ExtErrorCase {
  std::string label;
  Setter before;
  After after;
  E code;
  std::vector<std::string> mentions;
  bool paged = false;  // K and V as page pools [9, 2, 16, d]
};

Setter padded(Setter more = nullptr) {
  return [more](graph::Graph& g, SDPA_attributes& a) {
    a.set_padding_mask(true)
        .set_seq_len_q(input(g, "lq", {2, 1, 1, 1}, kI32))
        .set_seq_len_kv(input(g, "lkv", {2, 1, 1, 1}, kI32));
    if (more) more(g, a);
  };
}

Setter paged(Setter more = nullptr, std::vector<int64_t> table = {2, 1, 7, 1}) {
  return padded([more, table](graph::Graph& g, SDPA_attributes& a) {
    a.set_paged_attention_k_table(input(g, "kt", table, kI32)).set_paged_attention_v_table(input(g, "vt", table, kI32));
    if (more) more(g, a);
  });
}

TEST(SdpaExtValidation, ErrorsNameNodeAttributeAndValue) {
  auto scalar = [](graph::Graph& g, const char* name, DataType_t dt) { return input(g, name, {1, 1, 1, 1}, dt); };
  auto ragged = [](std::vector<int64_t> dims, DataType_t dt) {
    return After([=](graph::Graph& g, Tensors& t) { t.q->set_ragged_offset(input(g, "ro", dims, dt)); });
  };
  // clang-format off
  const std::vector<ExtErrorCase> cases = {
      {"ragged_dims", padded(), ragged({2, 1, 1, 1}, kI32), E::INVALID_VALUE,
       {"Q.ragged_offset", "[2, 1, 1, 1]", "[3, 1, 1, 1]"}},
      {"ragged_type", padded(), ragged({3, 1, 1, 1}, kF32), E::INVALID_VALUE, {"Q.ragged_offset", "FLOAT"}},
      {"o_ragged_no_padding", nullptr,
       [](auto& g, auto& t) { t.o->set_ragged_offset(input(g, "ro", {3, 1, 1, 1}, kI32)); }, E::INVALID_VALUE,
       {"O.ragged_offset", "padding_mask"}},
      {"stats_ragged_dims", padded(),
       [](auto& g, auto& t) { t.stats->set_ragged_offset(input(g, "ro", {3, 1, 1}, kI64)); }, E::INVALID_VALUE,
       {"STATS.ragged_offset", "[3, 1, 1]"}},
      {"cu_and_seq_len", padded([](auto& g, auto& a) { a.set_cu_seq_len_q(input(g, "cu", {3}, kI32)); }), nullptr,
       E::INVALID_VALUE, {"CU_SEQ_LEN_Q", "not both"}},
      {"cu_dims", [](auto& g, auto& a) {
         a.set_padding_mask(true).set_seq_len_q(input(g, "lq", {2, 1, 1, 1}, kI32));
         a.set_cu_seq_len_kv(input(g, "cu", {2}, kI32)); },
       nullptr, E::INVALID_VALUE, {"CU_SEQ_LEN_KV", "[2]", "[3]"}},
      {"cu_type", [](auto& g, auto& a) {
         a.set_padding_mask(true).set_cu_seq_len_q(input(g, "cu", {3}, kI64));
         a.set_seq_len_kv(input(g, "lkv", {2, 1, 1, 1}, kI32)); },
       nullptr, E::INVALID_VALUE, {"CU_SEQ_LEN_Q", "INT64"}},
      {"cu_without_padding", [](auto& g, auto& a) { a.set_cu_seq_len_q(input(g, "cu", {3}, kI32)); }, nullptr,
       E::INVALID_VALUE, {"CU_SEQ_LEN_Q", "padding_mask"}},
      {"max_total", padded([](auto&, auto& a) { a.set_max_total_seq_len_kv(0); }), nullptr, E::INVALID_VALUE,
       {"max_total_seq_len_kv", "= 0"}},
      {"one_page_table",
       padded([](auto& g, auto& a) { a.set_paged_attention_k_table(input(g, "kt", {2, 1, 7, 1}, kI32)); }),
       nullptr, E::ATTRIBUTE_NOT_SET, {"PAGE_TABLE_V"}, true},
      {"page_table_dims", paged(nullptr, {2, 7, 1, 1}), nullptr, E::INVALID_VALUE, {"PAGE_TABLE_K", "[2, 7, 1, 1]"},
       true},
      {"paged_without_seq_len", [](auto& g, auto& a) {
         a.set_paged_attention_k_table(input(g, "kt", {2, 1, 7, 1}, kI32));
         a.set_paged_attention_v_table(input(g, "vt", {2, 1, 7, 1}, kI32)); },
       nullptr, E::ATTRIBUTE_NOT_SET, {"SEQ_LEN_KV", "paged"}, true},
      {"paged_max_len", paged([](auto&, auto& a) { a.set_paged_attention_max_seq_len_kv(113); }), nullptr,
       E::INVALID_VALUE, {"paged_attention_max_seq_len_kv", "113", "[1, 112]"}, true},
      {"paged_max_len_without_tables", padded([](auto&, auto& a) { a.set_paged_attention_max_seq_len_kv(64); }),
       nullptr, E::INVALID_VALUE, {"paged_attention_max_seq_len_kv", "64", "PAGE_TABLE_K"}},
      {"paged_ragged_k", paged(), [](auto& g, auto& t) { t.k->set_ragged_offset(input(g, "ro", {3, 1, 1, 1}, kI32)); },
       E::INVALID_VALUE, {"K.ragged_offset", "page tables"}, true},
      {"block_mask_dims", [](auto& g, auto& a) { a.set_block_mask(input(g, "bm", {2, 4, 1, 2}, DataType_t::UINT8)); },
       nullptr, E::INVALID_VALUE, {"BLOCK_MASK", "[2, 4, 1, 2]", "[2 or 1, 4 or 1, 1, 1]"}},
      {"block_mask_tiles", [](auto& g, auto& a) {
         a.set_block_mask(input(g, "bm", {1, 1, 3, 3}, DataType_t::UINT8)).set_block_mask_tile_size(8, 32); },
       nullptr, E::INVALID_VALUE, {"BLOCK_MASK", "[1, 1, 3, 3]", "3, 4]", "8x32"}},
      {"block_mask_type", [](auto& g, auto& a) { a.set_block_mask(input(g, "bm", {1, 1, 1, 1}, kF32)); }, nullptr,
       E::INVALID_VALUE, {"BLOCK_MASK", "FLOAT"}},
      {"block_tile_zero", [](auto&, auto& a) { a.set_block_mask_tile_size(0, 128); }, nullptr, E::INVALID_VALUE,
       {"block_mask_tile_size", "0x128"}},
      {"dropout_p", [&](auto& g, auto& a) { a.set_dropout(1.0f, scalar(g, "s", kI64), scalar(g, "o", kI64)); }, nullptr,
       E::INVALID_VALUE, {"dropout_probability", "= 1:", "[0, 1)"}},
      {"dropout_no_seed", [&](auto& g, auto& a) { a.set_dropout(0.1f, nullptr, scalar(g, "o", kI64)); }, nullptr,
       E::ATTRIBUTE_NOT_SET, {"DROPOUT_SEED"}},
      {"dropout_seed_type", [&](auto& g, auto& a) { a.set_dropout(0.1f, scalar(g, "s", kF32), scalar(g, "o", kI64)); },
       nullptr, E::INVALID_VALUE, {"DROPOUT_SEED", "FLOAT"}},
      {"dropout_offset_dims",
       [&](auto& g, auto& a) { a.set_dropout(0.1f, scalar(g, "s", kI64), input(g, "o", {2}, kI64)); },
       nullptr, E::INVALID_VALUE, {"DROPOUT_OFFSET", "[2]"}},
      {"dropout_both", [&](auto& g, auto& a) {
         a.set_dropout(0.1f, scalar(g, "s", kI64), scalar(g, "o", kI64))
             .set_dropout(input(g, "m", {2, 4, 17, 111}, DataType_t::UINT8), scalar(g, "sc", kF32)); },
       nullptr, E::INVALID_VALUE, {"DROPOUT_MASK", "not both"}},
      {"dropout_mask_no_scale",
       [](auto& g, auto& a) { a.set_dropout(input(g, "m", {2, 4, 17, 111}, DataType_t::UINT8), nullptr); },
       nullptr, E::ATTRIBUTE_NOT_SET, {"DROPOUT_SCALE"}},
      {"dropout_mask_dims", [&](auto& g, auto& a) {
         a.set_dropout(input(g, "m", {2, 4, 17, 17}, DataType_t::UINT8), scalar(g, "sc", kF32)); },
       nullptr, E::INVALID_VALUE, {"DROPOUT_MASK", "[2, 4, 17, 17]", "111"}},
      {"dropout_scale_type", [&](auto& g, auto& a) {
         a.set_dropout(input(g, "m", {1, 1, 17, 111}, DataType_t::UINT8), scalar(g, "sc", DataType_t::HALF)); },
       nullptr, E::INVALID_VALUE, {"DROPOUT_SCALE", "HALF"}},
  };
  // clang-format on
  for (const ExtErrorCase& c : cases) {
    SCOPED_TRACE(c.label);
    graph::Graph g;
    g.set_io_data_type(kF32);
    SDPA_attributes a;
    a.set_name("attn").set_generate_stats(true);
    if (c.before) c.before(g, a);
    Tensors t;
    t.q = input(g, "q", {2, 4, 17, 24});
    t.k = input(g, "k", c.paged ? std::vector<int64_t>{9, 2, 16, 24} : std::vector<int64_t>{2, 2, 111, 24});
    t.v = input(g, "v", c.paged ? std::vector<int64_t>{9, 2, 16, 16} : std::vector<int64_t>{2, 2, 111, 16});
    auto [o, stats] = g.sdpa(t.q, t.k, t.v, a);
    t.o = o, t.stats = stats;
    o->set_output(true);
    stats->set_output(true);
    if (c.after) c.after(g, t);
    const error_t e = g.validate();
    EXPECT_EQ(e.get_code(), c.code) << e.get_message();
    EXPECT_NE(e.get_message().find("'attn'"), std::string::npos) << e.get_message();
    for (const auto& m : c.mentions)
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  }
}

// Every new attribute and port is written to JSON and read back.
TEST(SdpaExtValidation, JsonCarriesEveryNewAttributeAndPort) {
  graph::Graph g;
  g.set_io_data_type(kF32);
  SDPA_attributes a;
  a.set_name("attn").set_padding_mask(true).set_max_total_seq_len_q(40).set_max_total_seq_len_kv(300);
  a.set_seq_len_q(input(g, "lq", {2, 1, 1, 1}, kI32)).set_cu_seq_len_kv(input(g, "cu", {3}, kI32));
  a.set_block_mask(input(g, "bm", {1, 1, 5, 4}, DataType_t::BOOLEAN)).set_block_mask_tile_size(4, 32);
  a.set_dropout(0.125f, g.tensor(int64_t{99}), input(g, "off", {1}, kI64));
  auto q = input(g, "q", {2, 4, 17, 24});
  q->set_ragged_offset(input(g, "q_ro", {3, 1, 1, 1}, kI64, {1, 1, 1, 1}));
  auto [o, stats] = g.sdpa(q, input(g, "k", {2, 2, 111, 24}), input(g, "v", {2, 2, 111, 16}), a);
  o->set_output(true);
  ASSERT_TRUE(g.validate().is_good()) << g.validate().get_message();
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  const nlohmann::json j = nlohmann::json::parse(text);
  const auto& node = j["nodes"][0];
  for (const char* key : {"max_total_seq_len_q", "max_total_seq_len_kv", "dropout_probability", "block_mask_tile_q",
                          "block_mask_tile_kv"})
    EXPECT_TRUE(node.contains(key)) << key << " in " << node.dump();
  for (const char* port : {"SEQ_LEN_Q", "CU_SEQ_LEN_KV", "BLOCK_MASK", "DROPOUT_SEED", "DROPOUT_OFFSET"})
    EXPECT_TRUE(node["inputs"].contains(port)) << port << " in " << node.dump();
  graph::Graph back;
  ASSERT_TRUE(back.deserialize(text).is_good());
  ASSERT_TRUE(back.validate().is_good());
  std::string again;
  ASSERT_TRUE(back.serialize(again).is_good());
  EXPECT_EQ(again, text);
  // A probability without its seed is caught when the document is read back.
  nlohmann::json broken = j;
  broken["nodes"][0]["inputs"].erase("DROPOUT_SEED");
  graph::Graph bad;
  error_t e = bad.deserialize(broken.dump());
  if (e.is_good()) e = bad.validate();
  EXPECT_EQ(e.get_code(), E::ATTRIBUTE_NOT_SET) << e.get_message();
  EXPECT_NE(e.get_message().find("DROPOUT_SEED"), std::string::npos) << e.get_message();
}

}  // namespace
}  // namespace frost::test
