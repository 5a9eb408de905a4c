"""Batch, instance, adaptive-layer and group normalization, and the split batchnorm pieces that fuse around
convolutions (genstats, bn_finalize, dbn_weight).

X is [N, C, spatial...] by dims (NHWC is a stride choice). Per-channel tensors (scale, bias, batch and
running statistics, sums) are [1, C, 1, ..., 1]. Statistics outputs are FP32 unless set otherwise.
epsilon, momentum and accum_count are one-element tensors or Python numbers (pass-by-value scalars).
Backward ops return (dX, dScale, dBias).
"""

from .. import _frost
from ._common import reject_unsupported


class Builders:
    def _phased(self, attrs, norm_forward_phase, epsilon, compute_data_type, name, what):
        attrs = self._attributes(attrs, name, compute_data_type).set_forward_phase(norm_forward_phase)
        if epsilon is not None:
            attrs.set_epsilon(self._operand(epsilon, f"{what}: epsilon"))
        return attrs

    def _saved(self, attrs, mean, inv_variance, compute_data_type, name):
        return self._attributes(attrs, name, compute_data_type).set_saved_mean_and_inv_variance(mean, inv_variance)

    def _running(self, attrs, in_running_mean, in_running_var, momentum, what):
        if in_running_mean is not None or in_running_var is not None or momentum is not None:
            momentum = None if momentum is None else self._operand(momentum, f"{what}: momentum")
            attrs.set_previous_running_stats(in_running_mean, in_running_var, momentum)

    def batchnorm(
        self,
        input,
        scale,
        bias,
        in_running_mean=None,
        in_running_var=None,
        epsilon=None,
        momentum=None,
        peer_stats=None,
        compute_data_type=None,
        name="",
    ):
        """Training batchnorm: per channel, mean and biased variance over N and the spatial axes;
        Y = (input - mean) * inv_variance * scale + bias, inv_variance = 1 / sqrt(var + epsilon). With the
        running statistics and momentum: next_running_mean = (1 - momentum) * in_running_mean + momentum * mean,
        next_running_var likewise with the unbiased variance. Returns (Y, mean, inv_variance, next_running_mean,
        next_running_var); the running outputs are None without running statistics."""
        reject_unsupported("batchnorm()", peer_stats=peer_stats)
        attrs = self._attributes(_frost.Batchnorm_attributes(), name, compute_data_type)
        if epsilon is not None:
            attrs.set_epsilon(self._operand(epsilon, "batchnorm(): epsilon"))
        self._running(attrs, in_running_mean, in_running_var, momentum, "batchnorm()")
        return self._graph.batchnorm(input, scale, bias, attrs)

    def batchnorm_inference(self, input, mean, inv_variance, scale, bias, compute_data_type=None, name=""):
        """Y = (input - mean) * inv_variance * scale + bias with the given per-channel statistics (fold epsilon
        into inv_variance). Returns Y."""
        attrs = self._attributes(_frost.Batchnorm_inference_attributes(), name, compute_data_type)
        return self._graph.batchnorm_inference(input, mean, inv_variance, scale, bias, attrs)

    def batchnorm_backward(
        self, grad, input, scale, mean, inv_variance, peer_stats=None, compute_data_type=None, name=""
    ):
        """With xhat = (input - mean) * inv_variance and g = grad * scale over the M values of a channel:
        dX = inv_variance * (g - mean(g) - xhat * mean(g * xhat)), dScale = sum(grad * xhat), dBias = sum(grad)."""
        reject_unsupported("batchnorm_backward()", peer_stats=peer_stats)
        attrs = self._saved(_frost.Batchnorm_backward_attributes(), mean, inv_variance, compute_data_type, name)
        return self._graph.batchnorm_backward(grad, input, scale, attrs)

    def instancenorm(self, norm_forward_phase, input, scale, bias, epsilon, compute_data_type=None, name=""):
        """LayerNorm per (n, c) over the spatial axes with per-channel scale and bias; statistics
        [N, C, 1, ..., 1]. Returns (Y, mean, inv_variance); the statistics are None unless TRAINING."""
        attrs = self._phased(
            _frost.Instancenorm_attributes(), norm_forward_phase, epsilon, compute_data_type, name, "instancenorm()"
        )
        return self._graph.instancenorm(input, scale, bias, attrs)

    def instancenorm_backward(self, grad, input, scale, mean=None, inv_variance=None, compute_data_type=None, name=""):
        """The LayerNorm gradient per (n, c) on the saved statistics; dScale and dBias sum over N and space."""
        attrs = self._saved(_frost.Instancenorm_backward_attributes(), mean, inv_variance, compute_data_type, name)
        return self._graph.instancenorm_backward(grad, input, scale, attrs)

    def adalayernorm(self, norm_forward_phase, input, scale, bias=None, epsilon=None, compute_data_type=None, name=""):
        """LayerNorm with per-sample scale and bias: input [N, ..., C] (e.g. [B, S, D]), scale and bias
        [N, 1, ..., C]; the normalized axes are those after the first where scale's extent is not 1 (statistics
        [N, S, 1] by default). Returns (Y, mean, inv_variance); the statistics are None unless TRAINING."""
        attrs = self._phased(
            _frost.AdaLayernorm_attributes(), norm_forward_phase, epsilon, compute_data_type, name, "adalayernorm()"
        )
        return self._graph.adalayernorm(input, scale, bias, attrs)

    def adalayernorm_backward(self, grad, input, scale, mean, inv_variance, compute_data_type=None, name=""):
        """The LayerNorm gradient on the saved statistics; dScale and dBias have scale's (per-sample) dims."""
        attrs = self._saved(_frost.AdaLayernorm_backward_attributes(), mean, inv_variance, compute_data_type, name)
        return self._graph.adalayernorm_backward(grad, input, scale, attrs)

    def groupnorm(self, norm_forward_phase, input, scale, bias, epsilon, group_count, compute_data_type=None, name=""):
        """GroupNorm: the C channels form group_count consecutive groups; statistics per (n, group) over the
        group's channels and the spatial axes ([N, group_count, 1, ..., 1]); per-channel scale and bias.
        Returns (Y, mean, inv_variance); the statistics are None unless TRAINING."""
        attrs = self._phased(
            _frost.Groupnorm_attributes(), norm_forward_phase, epsilon, compute_data_type, name, "groupnorm()"
        )
        attrs.set_group_count(int(group_count))
        return self._graph.groupnorm(input, scale, bias, attrs)

    def groupnorm_backward(self, grad, input, scale, mean, inv_variance, compute_data_type=None, name=""):
        """The LayerNorm gradient over each (n, group); the group count comes from the saved statistics."""
        attrs = self._saved(_frost.Groupnorm_backward_attributes(), mean, inv_variance, compute_data_type, name)
        return self._graph.groupnorm_backward(grad, input, scale, attrs)

    def genstats(self, input, compute_data_type=None, name=""):
        """Per channel, sum(x) and sum(x * x) over N and the spatial axes. Returns (sum, sq_sum)."""
        attrs = self._attributes(_frost.Genstats_attributes(), name, compute_data_type)
        return self._graph.genstats(input, attrs)

    def bn_finalize(
        self,
        sum,
        sq_sum,
        scale,
        bias,
        epsilon,
        accum_count,
        in_running_mean=None,
        in_running_var=None,
        momentum=None,
        compute_data_type=None,
        name="",
    ):
        """From per-channel sums over accum_count values: mean = sum / count, var = sq_sum / count - mean^2,
        inv_variance = 1 / sqrt(var + epsilon), eq_scale = scale * inv_variance, eq_bias = bias - mean * eq_scale
        (so y = eq_scale * x + eq_bias), and the running update of batchnorm when running statistics are given.
        Returns (eq_scale, eq_bias, mean, inv_variance, next_running_mean, next_running_var)."""
        attrs = self._attributes(_frost.BN_finalize_attributes(), name, compute_data_type)
        self._running(attrs, in_running_mean, in_running_var, momentum, "bn_finalize()")
        if epsilon is not None:
            epsilon = self._operand(epsilon, "bn_finalize(): epsilon")
        if accum_count is not None:
            accum_count = self._operand(accum_count, "bn_finalize(): accum_count", _frost.data_type.INT64)
        return self._graph.bn_finalize(sum, sq_sum, scale, bias, epsilon, accum_count, attrs)

    def dbn_weight(self, grad, input, mean, inv_variance, scale, compute_data_type=None, name=""):
        """Batchnorm's weight gradients and the coefficients of its input gradient: dScale = sum(grad * xhat),
        dBias = sum(grad), and dX = eq_scale_dy * grad + eq_scale_x * input + eq_bias. Returns
        (dScale, dBias, eq_scale_dy, eq_scale_x, eq_bias)."""
        attrs = self._attributes(_frost.DBN_weight_attributes(), name, compute_data_type)
        return self._graph.dbn_weight(grad, input, mean, inv_variance, scale, attrs)
