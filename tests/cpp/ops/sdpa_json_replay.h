// Serializes a graph that has just run, deserializes it into a new Graph, runs that on the same
// buffers (outputs re-poisoned) and expects every output byte and the re-serialized text unchanged.
#pragma once

#include <string>
#include <vector>

#include "test_util.h"

namespace frost::test {

inline void expect_json_replay_identical(graph::Graph& g, const std::vector<HostTensor*>& buffers,
                                         const std::vector<HostTensor*>& outputs) {
  std::vector<std::vector<uint8_t>> first;
  for (HostTensor* o : outputs) first.push_back(o->bytes);
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  graph::Graph replay;
  error_t e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  // Poison in place (packed outputs are larger than their declared span, so not via HostTensor::poison).
  for (HostTensor* o : outputs) {
    const int64_t bits = element_bits(o->t->get_data_type());
    const int64_t count = static_cast<int64_t>(o->bytes.size() - 8) * 8 / bits;
    for (int64_t n = 0; n < count; ++n) detail::write_element(o->bytes.data(), o->t->get_data_type(), n, NAN);
  }
  e = build_and_run(replay, buffers);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (size_t i = 0; i < outputs.size(); ++i) EXPECT_EQ(outputs[i]->bytes, first[i]) << "output " << i;
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

}  // namespace frost::test
