"""moejit.MoE: a fused MoE layer as a torch-callable object built from spec fields."""
from typing import Optional, Union

from .activations import Activation, SwiGLU, parse_activation
from .errors import InvalidArgument
from .runtime import canonical, describe, make_spec, with_arch, _device_index


class MoE:
    """A fused Mixture-of-Experts layer of one spec.

    MoE(quant="bf16", activation=SwiGLU(...), routing="renormalize", w1_layout="up_gate",
    bias="none", backend="auto", topk=k, **spec_fields) where spec_fields are the other spec
    keys (dtype, group, zero_point, fp8_act, arch, n_group, topk_group, routed_scaling, logits,
    hidden, inter, experts, tile). Without arch the layer compiles for the device of its input.
    layer(x, w1, w2, router_logits, b1=..., ...) takes the tensors of moejit.fused_moe.
    """

    def __init__(self, quant: str = "bf16", activation: Union[Activation, str] = SwiGLU(),
                 routing: str = "renormalize", w1_layout: str = "up_gate", bias: str = "none",
                 backend: str = "auto", topk: Optional[int] = None, spec: Optional[str] = None,
                 **spec_fields):
        self.activation = parse_activation(activation)
        self.topk = topk
        if "act" in spec_fields:
            raise InvalidArgument("act: give the activation as activation=")
        self.spec = make_spec(spec, backend=backend, quant=quant, act=self.activation,
                              routing=routing, w1_layout=w1_layout, bias=bias, **spec_fields)
        # Validated now (with a stand-in arch when none is given), by the library.
        self.fields = describe(self.spec)
        if topk is not None and (not isinstance(topk, int) or topk < 1):
            raise InvalidArgument(f"topk: expected a positive int, got {topk!r}")

    def canonical(self, device=None) -> str:
        """The canonical spec on device (a CUDA device), or with the spec's own arch."""
        dev = _device_index(device)
        if dev is None:
            return canonical(self.spec)
        from .runtime import arch_of_device
        return canonical(with_arch(self.spec, arch_of_device(dev)))

    def warm(self, device=None):
        """Compiles (or loads from the disk cache) this layer's kernel for device, every GEMM
        path of it (a tensor-core layer compiles per path), and loads it, so that a CUDA-graph
        capture finds it; returns the kernel."""
        import torch
        from .runtime import warm
        if device is None and torch.cuda.is_available():
            device = torch.cuda.current_device()
        return warm([self], device=device)[0].kernel

    def __call__(self, x, w1, w2, router_logits=None, *, topk: Optional[int] = None, **kwargs):
        from .ops import fused_moe
        k = topk if topk is not None else (self.topk or 0)
        return fused_moe(self.spec, x, w1, w2, router_logits, topk=k, **kwargs)

    forward = __call__

    def __repr__(self):
        return f"MoE({self.spec!r}, topk={self.topk})"
