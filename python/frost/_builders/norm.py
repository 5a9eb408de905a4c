"""RMSNorm and LayerNorm builders, forward and backward. Statistics are FP32 unless set otherwise; a
Python number given as epsilon becomes a pass-by-value FLOAT scalar."""

from .. import _frost


class Builders:
    def rmsnorm(self, norm_forward_phase, input, scale=None, bias=None, epsilon=None, compute_data_type=None, name=""):
        """Y = input * inv_rms * scale (+ bias), inv_rms = 1 / sqrt(mean(input^2) + epsilon) over every
        axis but the first. Returns (Y, inv_rms); inv_rms is None unless norm_forward_phase is TRAINING."""
        attrs = self._attributes(_frost.Rmsnorm_attributes(), name, compute_data_type)
        attrs.set_forward_phase(norm_forward_phase)
        if epsilon is not None:
            attrs.set_epsilon(self._operand(epsilon, "rmsnorm(): epsilon"))
        if bias is not None:
            attrs.set_bias(bias)
        return self._graph.rmsnorm(input, scale, attrs)

    def layernorm(
        self, norm_forward_phase, input, scale=None, bias=None, epsilon=None, compute_data_type=None, name=""
    ):
        """Y = (input - mean) * inv_variance * scale + bias, inv_variance = 1 / sqrt(var(input) + epsilon)
        over every axis but the first. Returns (Y, mean, inv_variance); the statistics are None unless
        norm_forward_phase is TRAINING."""
        attrs = self._attributes(_frost.Layernorm_attributes(), name, compute_data_type)
        attrs.set_forward_phase(norm_forward_phase)
        if epsilon is not None:
            attrs.set_epsilon(self._operand(epsilon, "layernorm(): epsilon"))
        return self._graph.layernorm(input, scale, bias, attrs)

    def rmsnorm_backward(
        self, grad, input, scale, inv_rms=None, has_dbias=False, compute_data_type=None, name="", inv_variance=None
    ):
        """(dX, dScale, dBias) of rmsnorm from grad (dY), input, scale and the saved inv_rms
        (cuDNN Frontend's keyword inv_variance is accepted too). dBias is None unless has_dbias."""
        saved = inv_rms if inv_rms is not None else inv_variance
        attrs = self._attributes(_frost.Rmsnorm_backward_attributes(), name, compute_data_type)
        attrs.has_dbias_output(bool(has_dbias))
        return self._graph.rmsnorm_backward(grad, input, scale, saved, attrs)

    def layernorm_backward(self, grad, input, scale, mean, inv_variance, epsilon=None, compute_data_type=None, name=""):
        """(dX, dScale, dBias) of layernorm from grad (dY), input, scale and the saved mean and inv_variance."""
        attrs = self._attributes(_frost.Layernorm_backward_attributes(), name, compute_data_type)
        attrs.set_saved_mean_and_inv_variance(mean, inv_variance)
        if epsilon is not None:
            attrs.set_epsilon(self._operand(epsilon, "layernorm_backward(): epsilon"))
        return self._graph.layernorm_backward(grad, input, scale, attrs)
