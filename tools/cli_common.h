// Shared pieces of the `frost` command: handles, buffers on the plan's device, random inputs,
// and checking a plan's outputs against the fp64 reference.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "frost/frost.h"

namespace frost::cli {

// A tensor's buffer on the host and, for GPU plans, its device copy.
struct Buffer {
  graph::TensorPtr tensor;
  std::vector<uint8_t> host;
  void* device = nullptr;  // null for host plans
  int64_t bytes = 0;
};

class Buffers {
 public:
  Buffers(const Handle& h) : handle_(h) {}
  ~Buffers();
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  // One buffer per non-virtual, non-pass-by-value tensor of the graph; inputs get random values,
  // outputs a poison. `tiled`: a tensor larger than a block of 2^20 elements repeats its first block
  // (fast for large benchmark tensors whose values are never checked).
  error_t allocate(const graph::Graph& g, uint64_t seed, bool tiled = false);
  // Workspace of the given size on the plan's device.
  error_t allocate_workspace(int64_t bytes);
  void* workspace() const { return workspace_; }
  std::unordered_map<int64_t, void*> variant_pack() const;   // device pointers for GPU handles
  std::unordered_map<int64_t, void*> host_pack();             // host pointers
  error_t download_outputs();                                 // device -> host (outputs only)
  std::vector<Buffer>& all() { return buffers_; }
  bool is_output(const Buffer& b) const;

 private:
  Handle handle_;
  std::vector<Buffer> buffers_;
  std::vector<int64_t> output_uids_;
  void* workspace_ = nullptr;
  std::vector<uint8_t> host_workspace_;
};

struct OutputError {
  std::string name;
  DataType_t dtype;
  double max_abs = 0, rel_l2 = 0;
  bool has_nan = false;
  bool ok = false;
};

// Runs the graph's fp64 reference on copies of the inputs and compares every output.
error_t check_against_reference(const graph::Graph& g, Buffers& bufs, std::vector<OutputError>& out);

// The relative L2 error an output stored as `dt` may show against fp64.
double tolerance_for(DataType_t dt);

Handle best_handle();
// Builds the graph on the best device: a GPU when one is usable and some plan serves the whole graph
// there, else the host. Prints why the GPU was passed over. Returns the handle it built for.
error_t build_on_best_device(graph::Graph& g, Handle& handle);
std::string read_file(const std::string& path, bool& ok);

}  // namespace frost::cli
