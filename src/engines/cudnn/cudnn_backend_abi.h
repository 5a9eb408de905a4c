// The part of the cuDNN 9 backend C interface that the cudnn engine calls, declared by frost so that
// frost builds without cuDNN's headers. Functions are reached through dlopen (cudnn_library.h).
//
// Every enumeration of the interface is a C enum: an int on every platform frost targets. Values are
// passed and stored as int32_t and must equal the backend's: scripts/check_cudnn_abi.py compiles a
// static_assert for each against a cuDNN include folder (checked with cuDNN 9.19.1). Only values
// frost uses are listed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace frost::detail::cudnn_abi {

using Status = int32_t;
using Descriptor = void*;  // cudnnBackendDescriptor_t
using HandlePtr = void*;   // cudnnHandle_t

constexpr Status kSuccess = 0;
constexpr Status kNotSupported = 3000;  // and 3001..3999: the category "not supported"

// cudnnBackendDescriptorType_t
namespace desc {
constexpr int32_t POINTWISE = 0;
constexpr int32_t CONVOLUTION = 1;
constexpr int32_t ENGINE = 2;
constexpr int32_t ENGINECFG = 3;
constexpr int32_t ENGINEHEUR = 4;
constexpr int32_t EXECUTION_PLAN = 5;
constexpr int32_t KNOB_CHOICE = 7;
constexpr int32_t KNOB_INFO = 8;
constexpr int32_t OPERATION_CONVOLUTION_FORWARD = 10;
constexpr int32_t OPERATION_CONVOLUTION_BACKWARD_FILTER = 11;
constexpr int32_t OPERATION_CONVOLUTION_BACKWARD_DATA = 12;
constexpr int32_t OPERATION_POINTWISE = 13;
constexpr int32_t OPERATIONGRAPH = 15;
constexpr int32_t VARIANT_PACK = 16;
constexpr int32_t TENSOR = 17;
constexpr int32_t MATMUL = 18;
constexpr int32_t OPERATION_MATMUL = 19;
constexpr int32_t REDUCTION = 21;
constexpr int32_t OPERATION_REDUCTION = 22;
constexpr int32_t OPERATION_NORM_FORWARD = 29;
constexpr int32_t OPERATION_NORM_BACKWARD = 30;
constexpr int32_t OPERATION_RESHAPE = 31;
constexpr int32_t OPERATION_PAGED_CACHE_LOAD = 35;
}  // namespace desc

// cudnnBackendAttributeType_t
namespace type {
constexpr int32_t HANDLE = 0;
constexpr int32_t DATA_TYPE = 1;
constexpr int32_t BOOLEAN = 2;
constexpr int32_t INT64 = 3;
constexpr int32_t FLOAT = 4;
constexpr int32_t DOUBLE = 5;
constexpr int32_t VOID_PTR = 6;
constexpr int32_t CONVOLUTION_MODE = 7;
constexpr int32_t HEUR_MODE = 8;
constexpr int32_t KNOB_TYPE = 9;
constexpr int32_t NUMERICAL_NOTE = 11;
constexpr int32_t POINTWISE_MODE = 14;
constexpr int32_t BACKEND_DESCRIPTOR = 15;
constexpr int32_t REDUCTION_OPERATOR_TYPE = 18;
constexpr int32_t BEHAVIOR_NOTE = 19;
constexpr int32_t TENSOR_REORDERING_MODE = 20;
constexpr int32_t NORM_MODE = 27;
constexpr int32_t NORM_FWD_PHASE = 28;
}  // namespace type

// cudnnBackendAttributeName_t
namespace attr {
constexpr int32_t POINTWISE_MODE = 0;
constexpr int32_t POINTWISE_MATH_PREC = 1;
constexpr int32_t POINTWISE_RELU_LOWER_CLIP = 3;
constexpr int32_t POINTWISE_RELU_UPPER_CLIP = 4;
constexpr int32_t POINTWISE_RELU_LOWER_CLIP_SLOPE = 5;
constexpr int32_t POINTWISE_ELU_ALPHA = 6;
constexpr int32_t POINTWISE_SOFTPLUS_BETA = 7;
constexpr int32_t POINTWISE_SWISH_BETA = 8;
constexpr int32_t POINTWISE_AXIS = 9;

constexpr int32_t CONVOLUTION_COMP_TYPE = 100;
constexpr int32_t CONVOLUTION_CONV_MODE = 101;
constexpr int32_t CONVOLUTION_DILATIONS = 102;
constexpr int32_t CONVOLUTION_FILTER_STRIDES = 103;
constexpr int32_t CONVOLUTION_POST_PADDINGS = 104;
constexpr int32_t CONVOLUTION_PRE_PADDINGS = 105;
constexpr int32_t CONVOLUTION_SPATIAL_DIMS = 106;

constexpr int32_t ENGINEHEUR_MODE = 200;
constexpr int32_t ENGINEHEUR_OPERATION_GRAPH = 201;
constexpr int32_t ENGINEHEUR_RESULTS = 202;

constexpr int32_t ENGINECFG_ENGINE = 300;
constexpr int32_t ENGINECFG_KNOB_CHOICES = 302;

constexpr int32_t EXECUTION_PLAN_HANDLE = 400;
constexpr int32_t EXECUTION_PLAN_ENGINE_CONFIG = 401;
constexpr int32_t EXECUTION_PLAN_WORKSPACE_SIZE = 402;

constexpr int32_t KNOB_CHOICE_KNOB_TYPE = 600;
constexpr int32_t KNOB_CHOICE_KNOB_VALUE = 601;

constexpr int32_t OPERATION_CONVOLUTION_FORWARD_ALPHA = 700;
constexpr int32_t OPERATION_CONVOLUTION_FORWARD_BETA = 701;
constexpr int32_t OPERATION_CONVOLUTION_FORWARD_CONV_DESC = 702;
constexpr int32_t OPERATION_CONVOLUTION_FORWARD_W = 703;
constexpr int32_t OPERATION_CONVOLUTION_FORWARD_X = 704;
constexpr int32_t OPERATION_CONVOLUTION_FORWARD_Y = 705;
constexpr int32_t OPERATION_CONVOLUTION_BWD_DATA_ALPHA = 706;
constexpr int32_t OPERATION_CONVOLUTION_BWD_DATA_BETA = 707;
constexpr int32_t OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC = 708;
constexpr int32_t OPERATION_CONVOLUTION_BWD_DATA_W = 709;
constexpr int32_t OPERATION_CONVOLUTION_BWD_DATA_DX = 710;
constexpr int32_t OPERATION_CONVOLUTION_BWD_DATA_DY = 711;
constexpr int32_t OPERATION_CONVOLUTION_BWD_FILTER_ALPHA = 712;
constexpr int32_t OPERATION_CONVOLUTION_BWD_FILTER_BETA = 713;
constexpr int32_t OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC = 714;
constexpr int32_t OPERATION_CONVOLUTION_BWD_FILTER_DW = 715;
constexpr int32_t OPERATION_CONVOLUTION_BWD_FILTER_X = 716;
constexpr int32_t OPERATION_CONVOLUTION_BWD_FILTER_DY = 717;

constexpr int32_t OPERATION_POINTWISE_PW_DESCRIPTOR = 750;
constexpr int32_t OPERATION_POINTWISE_XDESC = 751;
constexpr int32_t OPERATION_POINTWISE_BDESC = 752;
constexpr int32_t OPERATION_POINTWISE_YDESC = 753;
constexpr int32_t OPERATION_POINTWISE_DXDESC = 756;
constexpr int32_t OPERATION_POINTWISE_DYDESC = 757;
constexpr int32_t OPERATION_POINTWISE_TDESC = 758;

constexpr int32_t OPERATIONGRAPH_HANDLE = 800;
constexpr int32_t OPERATIONGRAPH_OPS = 801;
constexpr int32_t OPERATIONGRAPH_ENGINE_GLOBAL_COUNT = 802;

constexpr int32_t TENSOR_BYTE_ALIGNMENT = 900;
constexpr int32_t TENSOR_DATA_TYPE = 901;
constexpr int32_t TENSOR_DIMENSIONS = 902;
constexpr int32_t TENSOR_STRIDES = 903;
constexpr int32_t TENSOR_UNIQUE_ID = 906;
constexpr int32_t TENSOR_IS_VIRTUAL = 907;
constexpr int32_t TENSOR_IS_BY_VALUE = 908;
constexpr int32_t TENSOR_REORDERING_MODE = 909;
constexpr int32_t TENSOR_RAGGED_OFFSET_DESC = 913;

constexpr int32_t VARIANT_PACK_UNIQUE_IDS = 1000;
constexpr int32_t VARIANT_PACK_DATA_POINTERS = 1001;
constexpr int32_t VARIANT_PACK_WORKSPACE = 1003;

constexpr int32_t KNOB_INFO_TYPE = 1200;
constexpr int32_t KNOB_INFO_MAXIMUM_VALUE = 1201;
constexpr int32_t KNOB_INFO_MINIMUM_VALUE = 1202;
constexpr int32_t KNOB_INFO_STRIDE = 1203;

constexpr int32_t ENGINE_OPERATION_GRAPH = 1300;
constexpr int32_t ENGINE_GLOBAL_INDEX = 1301;
constexpr int32_t ENGINE_KNOB_INFO = 1302;
constexpr int32_t ENGINE_NUMERICAL_NOTE = 1303;
constexpr int32_t ENGINE_BEHAVIOR_NOTE = 1305;

constexpr int32_t MATMUL_COMP_TYPE = 1500;
constexpr int32_t MATMUL_PADDING_VALUE = 1503;
constexpr int32_t OPERATION_MATMUL_ADESC = 1520;
constexpr int32_t OPERATION_MATMUL_BDESC = 1521;
constexpr int32_t OPERATION_MATMUL_CDESC = 1522;
constexpr int32_t OPERATION_MATMUL_DESC = 1523;
constexpr int32_t OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC = 1525;
constexpr int32_t OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC = 1526;
constexpr int32_t OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC = 1527;

constexpr int32_t REDUCTION_OPERATOR = 1600;
constexpr int32_t REDUCTION_COMP_TYPE = 1601;
constexpr int32_t REDUCTION_IS_DETERMINISTIC = 1602;
constexpr int32_t OPERATION_REDUCTION_XDESC = 1610;
constexpr int32_t OPERATION_REDUCTION_YDESC = 1611;
constexpr int32_t OPERATION_REDUCTION_DESC = 1612;

constexpr int32_t OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC = 1950;
constexpr int32_t OPERATION_PAGED_CACHE_LOAD_YDESC = 1951;
constexpr int32_t OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC = 1952;
constexpr int32_t OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC = 1953;

constexpr int32_t OPERATION_NORM_FWD_MODE = 2000;
constexpr int32_t OPERATION_NORM_FWD_PHASE = 2001;
constexpr int32_t OPERATION_NORM_FWD_XDESC = 2002;
constexpr int32_t OPERATION_NORM_FWD_MEAN_DESC = 2003;
constexpr int32_t OPERATION_NORM_FWD_INV_VARIANCE_DESC = 2004;
constexpr int32_t OPERATION_NORM_FWD_SCALE_DESC = 2005;
constexpr int32_t OPERATION_NORM_FWD_BIAS_DESC = 2006;
constexpr int32_t OPERATION_NORM_FWD_EPSILON_DESC = 2007;
constexpr int32_t OPERATION_NORM_FWD_YDESC = 2013;

constexpr int32_t OPERATION_NORM_BWD_MODE = 2100;
constexpr int32_t OPERATION_NORM_BWD_XDESC = 2101;
constexpr int32_t OPERATION_NORM_BWD_MEAN_DESC = 2102;
constexpr int32_t OPERATION_NORM_BWD_INV_VARIANCE_DESC = 2103;
constexpr int32_t OPERATION_NORM_BWD_DYDESC = 2104;
constexpr int32_t OPERATION_NORM_BWD_SCALE_DESC = 2105;
constexpr int32_t OPERATION_NORM_BWD_EPSILON_DESC = 2106;
constexpr int32_t OPERATION_NORM_BWD_DSCALE_DESC = 2107;
constexpr int32_t OPERATION_NORM_BWD_DBIAS_DESC = 2108;
constexpr int32_t OPERATION_NORM_BWD_DXDESC = 2109;

constexpr int32_t OPERATION_RESHAPE_XDESC = 2200;
constexpr int32_t OPERATION_RESHAPE_YDESC = 2201;
}  // namespace attr

// cudnnDataType_t
namespace dtype {
constexpr int32_t FLOAT = 0;
constexpr int32_t DOUBLE = 1;
constexpr int32_t HALF = 2;
constexpr int32_t INT8 = 3;
constexpr int32_t INT32 = 4;
constexpr int32_t INT8x4 = 5;
constexpr int32_t UINT8 = 6;
constexpr int32_t UINT8x4 = 7;
constexpr int32_t INT8x32 = 8;
constexpr int32_t BFLOAT16 = 9;
constexpr int32_t INT64 = 10;
constexpr int32_t BOOLEAN = 11;
constexpr int32_t FP8_E4M3 = 12;
constexpr int32_t FP8_E5M2 = 13;
constexpr int32_t FAST_FLOAT_FOR_FP8 = 14;
constexpr int32_t FP8_E8M0 = 15;
constexpr int32_t FP4_E2M1 = 16;
constexpr int32_t INT4 = 17;
}  // namespace dtype

// cudnnPointwiseMode_t
namespace pw {
constexpr int32_t ADD = 0, MUL = 1, MIN = 2, MAX = 3, SQRT = 4, ADD_SQUARE = 5, DIV = 6, MOD = 7, POW = 8, SUB = 9;
constexpr int32_t ABS = 10, CEIL = 11, COS = 12, EXP = 13, FLOOR = 14, LOG = 15, NEG = 16, RSQRT = 17, SIN = 18;
constexpr int32_t TAN = 19, ERF = 20, IDENTITY = 21, RECIPROCAL = 22;
constexpr int32_t RELU_FWD = 100, TANH_FWD = 101, SIGMOID_FWD = 102, ELU_FWD = 103, GELU_FWD = 104;
constexpr int32_t SOFTPLUS_FWD = 105, SWISH_FWD = 106, GELU_APPROX_TANH_FWD = 107;
constexpr int32_t RELU_BWD = 200, TANH_BWD = 201, SIGMOID_BWD = 202, ELU_BWD = 203, GELU_BWD = 204;
constexpr int32_t SOFTPLUS_BWD = 205, SWISH_BWD = 206, GELU_APPROX_TANH_BWD = 207;
constexpr int32_t CMP_EQ = 300, CMP_NEQ = 301, CMP_GT = 302, CMP_GE = 303, CMP_LT = 304, CMP_LE = 305;
constexpr int32_t LOGICAL_AND = 400, LOGICAL_OR = 401, LOGICAL_NOT = 402;
constexpr int32_t GEN_INDEX = 501;
constexpr int32_t BINARY_SELECT = 601;
}  // namespace pw

// cudnnReduceTensorOp_t
namespace reduce {
constexpr int32_t ADD = 0, MUL = 1, MIN = 2, MAX = 3, AMAX = 4, AVG = 5, NORM1 = 6, NORM2 = 7, MUL_NO_ZEROS = 8;
}

// cudnnConvolutionMode_t
constexpr int32_t kConvolution = 0;
constexpr int32_t kCrossCorrelation = 1;

// cudnnBackendHeurMode_t
namespace heur {
constexpr int32_t INSTANT = 0, B = 1, FALLBACK = 2, A = 3;
}

// cudnnBackendNormMode_t and cudnnBackendNormFwdPhase_t
constexpr int32_t kLayerNorm = 0;
constexpr int32_t kRmsNorm = 4;
constexpr int32_t kNormInference = 0;
constexpr int32_t kNormTraining = 1;

// cudnnBackendTensorReordering_t: NONE, INT8x32, F16x16, F8_128x4 are 0..3 in frost's order too.

// cudnnBackendNumericalNote_t (0..9) and cudnnBackendBehaviorNote_t (0..3) share frost's order;
// behavior note 4 (CUBLASLT_DEPENDENCY) has no frost name.

// The highest backend knob integer that cuDNN 9.19 names (CUDNN_KNOB_TYPE_SWAP_AB); 44 is its count.
constexpr int32_t kKnobCount = 44;

// Function types, in the C calling convention of the library.
extern "C" {
using GetVersionFn = size_t (*)();
using GetErrorStringFn = const char* (*)(Status);
using GetLastErrorStringFn = void (*)(char* message, size_t max_size);
using CreateFn = Status (*)(HandlePtr* handle);
using SetStreamFn = Status (*)(HandlePtr handle, void* stream);
using BackendCreateDescriptorFn = Status (*)(int32_t descriptor_type, Descriptor* descriptor);
using BackendDestroyDescriptorFn = Status (*)(Descriptor descriptor);
using BackendFinalizeFn = Status (*)(Descriptor descriptor);
using BackendSetAttributeFn = Status (*)(Descriptor descriptor, int32_t name, int32_t type, int64_t count,
                                         const void* elements);
using BackendGetAttributeFn = Status (*)(Descriptor descriptor, int32_t name, int32_t type, int64_t requested,
                                         int64_t* count, void* elements);
using BackendExecuteFn = Status (*)(HandlePtr handle, Descriptor plan, Descriptor variant_pack);
}

}  // namespace frost::detail::cudnn_abi
