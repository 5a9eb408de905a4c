// Checks of an op's ports shared by the recurrent-state families (linear attention, Mamba-2): dims and data
// types of inputs with errors that name the port, and the inference of an output's dims, strides and type.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "graph/graph_state.h"

namespace frost::detail {

// Value tensors (inputs, outputs, gradients): FLOAT, HALF, BFLOAT16, or DOUBLE for the fp64 mode.
bool is_value_type(DataType_t dt);
// Recurrent states stay FP32 (as flash-linear-attention and mamba_ssm keep them); DOUBLE serves the fp64 mode.
bool is_state_type(DataType_t dt);

// "<port>.dim" error unless t's dims are `want`; `because` says where `want` comes from.
error_t expect_dims(const Node& n, const char* port, const TensorPtr& t, const std::vector<int64_t>& want,
                    std::string_view because);
// "<port>.data_type" error unless `ok`; `allowed` lists what is.
error_t expect_type(const Node& n, const char* port, const TensorPtr& t, bool ok, std::string_view allowed);

// Deserialized graphs may bind any port: an error naming the first of `ports` that holds a tensor, `why` it must
// not (e.g. "is a backward output" on a forward node).
error_t reject_bound(Node& n, std::initializer_list<const char*> ports, std::string_view why);

// An output the op fills: dims as given (a user-set value must agree), strides ordered like `like`, and, with no
// data type from the user, `fallback`, else the graph context's (io or intermediate), else `like`'s.
error_t infer_output(const Node& n, const GraphContext& ctx, const char* port, const TensorPtr& t,
                     const std::vector<int64_t>& dims, const TensorPtr& like,
                     DataType_t fallback = DataType_t::NOT_SET);

}  // namespace frost::detail
