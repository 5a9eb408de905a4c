// Fuzzes Graph::deserialize (and validate on what it accepts): no input may crash, hang or throw.
// Built two ways: with -fsanitize=fuzzer (libFuzzer drives LLVMFuzzerTestOneInput), or as a plain
// program that mutates seed documents for a bounded time:  frost_fuzz_deserialize --seconds N
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "frost/frost.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  frost::graph::Graph g;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (g.deserialize(text).is_good() && g.validate().is_good()) {
    std::string again;
    g.serialize(again);
    (void)g.key();
  }
  std::vector<uint8_t> bytes(data, data + size);
  frost::graph::Graph p;
  frost::Handle h(frost::Device::cpu());
  (void)p.deserialize(h, bytes);
  return 0;
}

#ifndef FROST_LIBFUZZER
namespace {

// Seeds: small valid graphs covering tensors, pass-by-value scalars and several ops.
std::vector<std::string> seeds() {
  using namespace frost;
  std::vector<std::string> out;
  {
    graph::Graph g;
    g.set_io_data_type(DataType_t::BFLOAT16).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
    auto a = g.tensor(graph::Tensor_attributes().set_name("a").set_dim({2, 3, 4}));
    auto b = g.tensor(graph::Tensor_attributes().set_name("b").set_dim({2, 4, 5}));
    auto c = g.matmul(a, b, graph::Matmul_attributes());
    auto d = g.pointwise(c, g.tensor(0.5f), graph::Pointwise_attributes().set_mode(PointwiseMode_t::MUL));
    auto e = g.pointwise(d, graph::Pointwise_attributes().set_mode(PointwiseMode_t::RELU_FWD));
    e->set_output(true);
    std::string s;
    if (g.validate().is_good() && g.serialize(s).is_good()) out.push_back(s);
  }
  {
    graph::Graph g;
    g.set_io_data_type(DataType_t::HALF).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
    auto q = g.tensor(graph::Tensor_attributes().set_name("q").set_dim({1, 2, 5, 8}));
    auto k = g.tensor(graph::Tensor_attributes().set_name("k").set_dim({1, 1, 7, 8}));
    auto v = g.tensor(graph::Tensor_attributes().set_name("v").set_dim({1, 1, 7, 8}));
    auto [o, st] = g.sdpa(q, k, v, graph::SDPA_attributes().set_causal_mask_bottom_right(true).set_generate_stats(true));
    o->set_output(true);
    st->set_output(true);
    std::string s;
    if (g.validate().is_good() && g.serialize(s).is_good()) out.push_back(s);
  }
  {
    graph::Graph g;
    g.set_io_data_type(DataType_t::FLOAT);
    auto x = g.tensor(graph::Tensor_attributes().set_name("x").set_dim({4, 6}));
    auto s = g.tensor(graph::Tensor_attributes().set_name("scale").set_dim({1, 6}));
    auto [y, inv] = g.rmsnorm(x, s, graph::Rmsnorm_attributes().set_forward_phase(NormFwdPhase_t::TRAINING).set_epsilon(g.tensor(1e-5f)));
    y->set_output(true);
    inv->set_output(true);
    std::string t;
    if (g.validate().is_good() && g.serialize(t).is_good()) out.push_back(t);
  }
  return out;
}

std::string mutate(std::string s, std::mt19937_64& rng, const std::vector<std::string>& pool) {
  static const char* tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "null", "true", "-1", "0", "1e308", "-9223372036854775808",
                                 "18446744073709551615", "\"2.0\"", "\"1.0\"", "\"uid\"", "\"dim\"", "\"tensors\"",
                                 "\"nodes\"", "\"FLOAT\"", "\"SDPA\"", "\\u0000", "1.5", "[[[[[[[["};
  std::uniform_int_distribution<int> op(0, 6);
  const int n = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n && !s.empty(); ++i) {
    const size_t pos = rng() % s.size();
    switch (op(rng)) {
      case 0: s[pos] = static_cast<char>(rng() & 0xFF); break;                         // flip a byte
      case 1: s.erase(pos, 1 + rng() % 16); break;                                      // delete a run
      case 2: s.insert(pos, tokens[rng() % (sizeof(tokens) / sizeof(tokens[0]))]); break;  // insert a token
      case 3: s.resize(pos); break;                                                     // truncate
      case 4: {                                                                         // splice another seed
        const std::string& o = pool[rng() % pool.size()];
        const size_t from = rng() % o.size();
        s.insert(pos, o.substr(from, rng() % 64));
        break;
      }
      case 5: {  // replace a number with an extreme one
        const size_t d = s.find_first_of("0123456789", pos);
        if (d != std::string::npos) s.replace(d, 1, rng() % 2 ? "-5" : "99999999999999999");
        break;
      }
      default: s.insert(pos, std::string(rng() % 8, static_cast<char>('[' + 2 * (rng() % 2)))); break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seed")) seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  const auto pool = seeds();
  if (pool.size() != 3) {
    std::fprintf(stderr, "fuzz: could not build the seed graphs\n");
    return 1;
  }
  std::mt19937_64 rng(seed);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t runs = 0;
  std::vector<std::string> corpus = pool;
  while (std::chrono::steady_clock::now() < end) {
    std::string s = mutate(corpus[rng() % corpus.size()], rng, pool);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    if (corpus.size() < 256 && rng() % 8 == 0) corpus.push_back(s);
    ++runs;
  }
  std::printf("fuzz: %llu inputs in %.0f s, no crash\n", static_cast<unsigned long long>(runs), seconds);
  return 0;
}
#endif
