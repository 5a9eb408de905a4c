// Lowering a validated frost graph to cuDNN backend descriptors: tensors, then one or more backend
// operations per node, then the operation graph.
//
// Tensor descriptors keep frost's uids. Nodes that the backend has no single operation for (SDPA
// forward and backward) become the composite of matmul, pointwise, reduction, reshape and paged
// cache-load operations that the backend's fused attention engines recognize; their intermediate
// tensors take fresh uids above the graph's. A few of those intermediates are not virtual (the
// backward's row sums of dO * O, its FP32 dQ accumulator, per-head dK/dV under GQA): they live in the
// front of the caller's workspace, which the plan reports as part of its size.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engines/cudnn/cudnn_descriptor.h"
#include "graph/graph_state.h"

namespace frost::detail {

// A backend tensor as the lowering sees it.
struct BTensor {
  DescPtr desc;
  int64_t uid = 0;
  std::vector<int64_t> dims, strides;
  DataType_t dtype = DataType_t::NOT_SET;
};

// Where execute() finds the pointer for a uid of the operation graph.
struct Binding {
  enum class Source { CALLER, BY_VALUE, WORKSPACE };
  int64_t uid = 0;
  Source source = Source::CALLER;
  int64_t index = 0;  // BY_VALUE: slot in Lowered::by_value; WORKSPACE: byte offset
};

// Everything a plan needs from the lowering; the descriptors stay alive with it.
struct Lowered {
  std::vector<DescPtr> keep;  // every tensor and operation descriptor the operation graph refers to
  std::vector<DescPtr> ops;
  DescPtr op_graph;
  std::vector<Binding> bindings;
  std::vector<std::array<uint8_t, 8>> by_value;  // host bytes of pass-by-value scalars
  int64_t frost_workspace = 0;                   // bytes at the front of the workspace (multiple of 256)
};

class Lowering {
 public:
  Lowering(const CudnnLibrary& lib, const GraphState& g, Lowered& out);

  // Lowers every node; GRAPH_NOT_SUPPORTED with the node and attribute named when it cannot.
  error_t run();

  const CudnnLibrary& lib() const { return lib_; }
  const GraphState& graph() const { return g_; }

  // The descriptor of a graph tensor (made once per uid). `view` replaces its dims and strides, for
  // operands the backend wants in another arrangement of the same memory (K^T in attention); a uid
  // must be asked for in one arrangement only.
  error_t tensor(const TensorPtr& t, BTensor& out);
  error_t tensor_view(const TensorPtr& t, std::vector<int64_t> dims, std::vector<int64_t> strides, BTensor& out);
  // A fresh virtual tensor (row-major strides unless given; a ragged offset where it views a ragged input).
  error_t virtual_tensor(std::vector<int64_t> dims, DataType_t dt, BTensor& out, std::vector<int64_t> strides = {},
                         const TensorPtr& ragged = nullptr);
  // A fresh pass-by-value scalar, [1, ..., 1] at the graph's operand rank.
  error_t scalar(double value, DataType_t dt, BTensor& out);
  // A fresh non-virtual tensor that lives in frost's part of the workspace (`span` elements).
  error_t workspace_tensor(std::vector<int64_t> dims, std::vector<int64_t> strides, DataType_t dt, int64_t span,
                           const TensorPtr& ragged, BTensor& out);

  // Backend operations; `what` names the frost node in errors. `attrs` gives a pointwise node's clips
  // and betas; `axis` (GEN_INDEX) is a descriptor axis.
  error_t pointwise(const std::string& what, int32_t mode, const BTensor& x, const BTensor* b, const BTensor* t,
                    const BTensor& y, const graph::Pointwise_attributes* attrs = nullptr, int64_t axis = -1,
                    DataType_t compute = DataType_t::FLOAT);
  // y = op(x) / op(x, b) with a fresh virtual y of the given dims and type.
  error_t pw(const std::string& what, int32_t mode, const BTensor& x, const BTensor* b, std::vector<int64_t> dims,
             DataType_t dt, BTensor& y, int64_t axis = -1, DataType_t compute = DataType_t::FLOAT);
  error_t matmul(const std::string& what, const BTensor& a, const BTensor& b, const BTensor& c,
                 const BTensor* m_override, const BTensor* n_override, const BTensor* k_override, double padding = 0.0);
  error_t reduction(const std::string& what, int32_t mode, const BTensor& x, const BTensor& y,
                    bool deterministic = false);
  error_t reshape(const std::string& what, const BTensor& x, const BTensor& y);
  error_t paged_cache_load(const std::string& what, const BTensor& container, const BTensor& seq_len,
                           const BTensor& page_table, const BTensor& y);
  // Adds a finalized operation descriptor.
  void add_op(const DescPtr& op) { out_.ops.push_back(op); }
  void keep(const DescPtr& d) { out_.keep.push_back(d); }

  error_t unsupported(const Node& n, const std::string& why) const;
  // The descriptor axis of a graph tensor's axis (rank padding and the channels-last view move axes).
  int64_t descriptor_axis(const TensorPtr& t, int64_t axis) const;

 private:
  error_t make_tensor(const TensorPtr& t, std::vector<int64_t> dims, std::vector<int64_t> strides, BTensor& out);
  void plan_ranks();

  const CudnnLibrary& lib_;
  const GraphState& g_;
  Lowered& out_;
  std::map<int64_t, BTensor> by_uid_;
  int64_t next_uid_ = 1;
  size_t scalar_rank_ = 4;
  bool channels_last_ = false;
  bool trailing_pad_ = false;
  // Graph tensors whose descriptor dims differ from the declaration (rank padding), by uid.
  std::map<int64_t, std::pair<std::vector<int64_t>, std::vector<int64_t>>> shaped_;
};

// Backend spelling of frost enums; false where the backend has none.
bool backend_dtype(DataType_t dt, int32_t& out);
bool backend_pointwise_mode(PointwiseMode_t m, int32_t& out);
bool backend_reduction_mode(ReductionMode_t m, int32_t& out);

// Per-family lowerings (cudnn_lower_ops.cpp, cudnn_lower_sdpa.cpp); each returns GRAPH_NOT_SUPPORTED
// for nodes that are not its own.
error_t lower_basic_node(Lowering& l, const Node& n, bool& handled);
error_t lower_sdpa_node(Lowering& l, const Node& n, bool& handled);

// Lowers and builds the operation graph on `handle` (a cudnnHandle_t; may be null with cuDNN >= 9.8).
error_t lower_graph(const CudnnLibrary& lib, const GraphState& g, cudnn_abi::HandlePtr handle, Lowered& out);

}  // namespace frost::detail
