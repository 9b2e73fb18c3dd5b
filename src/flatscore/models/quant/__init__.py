"""In-process precision arms: weight-only formats applied to a loaded model's weights.

Weights are quantized and immediately dequantized ("fake quantization"): the model keeps
computing in fp32, so activations and the KV cache stay in the compute dtype, as in the
study, and only the weight values change. `arms.ARMS` (a `flatscore.registry.Registry`)
names every arm.
"""

from flatscore.models.quant.arms import ARMS, Arm, apply_arm, quantizable_linears, register_arm

__all__ = ["ARMS", "Arm", "apply_arm", "quantizable_linears", "register_arm"]
