"""ctypes binding of libfrost_gemm.so's C ABI (src/engines/sm90/gemm/gemm_capi.cu) for torch tensors.

Each call returns None on success or the decline reason (str); launch failures raise RuntimeError.
Operands are torch CUDA tensors whose strides describe the layout (a transposed view is a
column-major operand; an expanded batch dim is a broadcast, stride 0).
"""
import ctypes

import torch

BF16, FP16, FP32, E4M3, E5M2 = range(5)
ACTS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4, "sigmoid": 5}
_DT = {
    torch.bfloat16: BF16,
    torch.float16: FP16,
    torch.float32: FP32,
    torch.float8_e4m3fn: E4M3,
    torch.float8_e5m2: E5M2,
}
I32, I64, F32, P = ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p


class GemmC(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("a_type", "b_type", "d_type", "act")] + [
        (n, I64) for n in ("m", "n", "k", "batch")] + [(n, P) for n in ("a", "b", "d")] + [
        (n, I64) for n in ("a_stride_batch", "a_stride_m", "a_stride_k", "b_stride_batch", "b_stride_k",
                           "b_stride_n", "d_stride_batch", "d_stride_m", "d_stride_n")] + [
        (n, F32) for n in ("alpha", "beta", "clamp_min", "clamp_max")] + [
        (n, P) for n in ("bias", "c", "descale_a", "descale_b", "scale_d", "amax")] + [
        ("fp8_fast_accum", I32), ("reserved", I32)]


class ConfigC(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("tile_m", "tile_n", "tile_k", "stages", "cluster_m", "cluster_n", "swizzle",
                                   "split_k", "stream_k")]


class GroupedC(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("a_type", "b_type", "d_type", "reserved")] + [
        (n, I64) for n in ("groups", "max_tokens", "n", "k")] + [(n, P) for n in ("offsets", "a", "b", "d")] + [
        (n, I64) for n in ("a_stride_m", "b_stride_group", "b_stride_k", "b_stride_n", "d_stride_m")] + [
        ("alpha", F32), ("reserved2", F32), ("descale_a", P), ("descale_b", P)]


class SwigluC(ctypes.Structure):
    _fields_ = [(n, I32) for n in ("a_type", "b_type", "d_type", "reserved")] + [(n, I64) for n in ("m", "f", "k")] + [
        (n, P) for n in ("a", "w", "h")] + [(n, I64) for n in ("a_stride_m", "a_stride_k", "w_stride_k", "w_stride_n",
                                                               "h_stride_m")] + [("alpha", F32), ("reserved2", F32)]


def _ptr(t):
    return None if t is None else t.data_ptr()


class FrostGemm:
    def __init__(self, path):
        self.lib = lib = ctypes.CDLL(path)
        for name, st in (("gemm", GemmC), ("grouped_gemm", GroupedC), ("swiglu", SwigluC)):
            getattr(lib, f"frost_sm90_{name}_reason").restype = ctypes.c_char_p
            getattr(lib, f"frost_sm90_{name}_reason").argtypes = [ctypes.POINTER(st), ctypes.POINTER(ConfigC)]
            getattr(lib, f"frost_sm90_{name}_workspace").restype = ctypes.c_size_t
            getattr(lib, f"frost_sm90_{name}_workspace").argtypes = [ctypes.POINTER(st), ctypes.POINTER(ConfigC)]
            getattr(lib, f"frost_sm90_{name}").restype = I32
            getattr(lib, f"frost_sm90_{name}").argtypes = [ctypes.POINTER(st), ctypes.POINTER(ConfigC), P, P]
        self._ws = {}
        assert lib.frost_sm90_gemm_abi_version() == 1

    def _workspace(self, nbytes):
        # One cached buffer per size: allocated outside the timed/captured region.
        if nbytes == 0:
            return None
        if nbytes not in self._ws:
            self._ws[nbytes] = torch.empty(nbytes + 256, dtype=torch.uint8, device="cuda")
        return self._ws[nbytes].data_ptr()

    def _call(self, name, s, cfg):
        c = ConfigC(**(cfg or {}))
        why = getattr(self.lib, f"frost_sm90_{name}_reason")(ctypes.byref(s), ctypes.byref(c))
        if why:
            return why.decode()
        ws = self._workspace(getattr(self.lib, f"frost_sm90_{name}_workspace")(ctypes.byref(s), ctypes.byref(c)))
        rc = getattr(self.lib, f"frost_sm90_{name}")(ctypes.byref(s), ctypes.byref(c), ws,
                                                     torch.cuda.current_stream().cuda_stream)
        if rc != 0:
            raise RuntimeError(f"frost_sm90_{name} returned cudaError {rc}")
        return None

    def gemm(self, a, b, d, *, alpha=1.0, bias=None, c=None, beta=0.0, act="none", clamp=None, descale_a=None,
             descale_b=None, scale_d=None, amax=None, fast_accum=False, cfg=None, m=None, n=None, k=None):
        """D[b] = act(alpha*da*db * A[b] @ B[b] + bias + beta*C[b]) (clamped) * scale_d. a:[B,m,k] b:[B,k,n] d:[B,m,n]."""
        a3, b3, d3 = (t if t.dim() == 3 else t.unsqueeze(0) for t in (a, b, d))
        if c is not None and c.dim() == 2:
            c = c.unsqueeze(0)
        batch = max(a3.shape[0], b3.shape[0], d3.shape[0])
        sa, sb, sd = a3.stride(), b3.stride(), d3.stride()
        s = GemmC(a_type=_DT[a.dtype], b_type=_DT[b.dtype], d_type=_DT[d.dtype], act=ACTS[act],
                  m=m or a3.shape[1], n=n or b3.shape[2], k=k or a3.shape[2], batch=batch,
                  a=a3.data_ptr(), b=b3.data_ptr(), d=d3.data_ptr(),
                  a_stride_batch=sa[0] if a3.shape[0] > 1 else 0, a_stride_m=sa[1], a_stride_k=sa[2],
                  b_stride_batch=sb[0] if b3.shape[0] > 1 else 0, b_stride_k=sb[1], b_stride_n=sb[2],
                  d_stride_batch=sd[0], d_stride_m=sd[1], d_stride_n=sd[2],
                  alpha=alpha, beta=beta, clamp_min=clamp[0] if clamp else float("-inf"),
                  clamp_max=clamp[1] if clamp else float("inf"), bias=_ptr(bias), c=_ptr(c),
                  descale_a=_ptr(descale_a), descale_b=_ptr(descale_b), scale_d=_ptr(scale_d), amax=_ptr(amax),
                  fp8_fast_accum=int(fast_accum))
        if c is not None:
            assert c.stride() == d3.stride(), "C must share D's strides"
        return self._call("gemm", s, cfg)

    def grouped(self, a, b, d, offsets, *, alpha=1.0, descale_a=None, descale_b=None, cfg=None):
        """Rows offsets[g]:offsets[g+1] of D = alpha*da*db * A rows @ B[g]; a:[T,k], b:[G,k,n] (any strides),
        d:[T,n]; descale_a / descale_b: FP32 device scalars (FP8)."""
        s = GroupedC(a_type=_DT[a.dtype], b_type=_DT[b.dtype], d_type=_DT[d.dtype], groups=b.shape[0],
                     max_tokens=a.shape[0], n=b.shape[2], k=b.shape[1], offsets=offsets.data_ptr(),
                     a=a.data_ptr(), b=b.data_ptr(), d=d.data_ptr(), a_stride_m=a.stride(0),
                     b_stride_group=b.stride(0), b_stride_k=b.stride(1), b_stride_n=b.stride(2),
                     d_stride_m=d.stride(0), alpha=alpha, descale_a=_ptr(descale_a), descale_b=_ptr(descale_b))
        return self._call("grouped_gemm", s, cfg)

    def swiglu(self, a, w_interleaved, h, *, alpha=1.0, cfg=None):
        """h[m, f] = silu(alpha * a @ W_gate) * (alpha * a @ W_up), W given as [k, 2f] interleaved in blocks of 8."""
        s = SwigluC(a_type=_DT[a.dtype], b_type=_DT[w_interleaved.dtype], d_type=_DT[h.dtype], m=a.shape[0],
                    f=h.shape[1], k=a.shape[1], a=a.data_ptr(), w=w_interleaved.data_ptr(), h=h.data_ptr(),
                    a_stride_m=a.stride(0), a_stride_k=a.stride(1), w_stride_k=w_interleaved.stride(0),
                    w_stride_n=w_interleaved.stride(1), h_stride_m=h.stride(0), alpha=alpha)
        return self._call("swiglu", s, cfg)


def interleave_gate_up(w_gate, w_up, block=8):
    """[k, f] gate and up -> [k, 2f] with columns interleaved in blocks of `block` (frost's SwiGLU layout)."""
    k, f = w_gate.shape
    return torch.stack([w_gate.reshape(k, f // block, block), w_up.reshape(k, f // block, block)], dim=2).reshape(
        k, 2 * f)
