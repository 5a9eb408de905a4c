// frost: an open graph library in the shape of cuDNN Frontend.
//   namespace fe = frost;  fe::graph::Graph g; ...
#pragma once

#include "frost/error.h"
#include "frost/graph.h"
#include "frost/handle.h"
#include "frost/knobs.h"
#include "frost/tensor.h"
#include "frost/types.h"
