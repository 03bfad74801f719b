"""Names and launch shapes of the GPU kernels a transformer training step runs, and the NCCL
kernel names per NCCL version.

Compute kernels are described by :class:`KernelKind`: the CPU op chain PyTorch records around
the launch (``aten::linear`` > ``aten::addmm``), the kernel name CUPTI reports (per GPU
architecture), its launch geometry (the ``grid``/``block``/occupancy args Kineto writes), and
its share of the layer's time. The shares are rough but keep the familiar proportions: GEMMs
and attention dominate, element-wise kernels are short.
"""

from __future__ import annotations

from dataclasses import dataclass

from stallscope.samples.versions import NcclVersion


@dataclass(frozen=True)
class KernelKind:
    key: str
    ops: tuple[str, ...]  #: cpu_op names, outermost first (the last one launches)
    names: dict[str, str]  #: arch ("sm80"/"sm90") -> kernel name
    share: float  #: share of the phase (forward/backward layer) time
    geom: tuple[int, int, int, int, float, float, int]  #: grid.x, block.x, regs, smem, blocks/SM, warps/SM, occupancy %
    input_dims: str = "[[8, 2048, 4096]]"  #: ``Input Dims`` recorded with shapes (JSON text)

    def name(self, arch: str) -> str:
        return self.names.get(arch) or self.names["sm80"]


_GEMM = {
    "sm80": "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn",
    "sm90": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
}
_GEMM_NN = {
    "sm80": "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn",
    "sm90": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
}
_GEMM_NT = {
    "sm80": "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nt",
    "sm90": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
}
_LN = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
_LN_BWD = "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)"
_FLASH_FWD = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)"
_FLASH_BWD = "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, true, false, false, false, false, true, false, false>(pytorch_flash::Flash_bwd_params)"
_ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)"
_GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)"
_GELU_BWD = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3>)"
_ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*)"
_NORM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::LpNormFunctor<float, (at::native::(anonymous namespace)::NormType)1, float, float>, float*, int>(at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::LpNormFunctor<float, (at::native::(anonymous namespace)::NormType)1, float, float>, float*, int)"
_XENT = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)"
_XENT_BWD = "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, long)"
_FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"


def _k(key: str, ops: tuple[str, ...], name: str | dict[str, str], share: float, geom: tuple[int, int, int, int, float, float, int], dims: str = "[[8, 2048, 4096]]") -> KernelKind:
    return KernelKind(key, ops, name if isinstance(name, dict) else {"sm80": name}, share, geom, dims)


# Forward of one transformer block, full detail (shares sum to 1)
FWD_FULL: tuple[KernelKind, ...] = (
    _k("ln1", ("aten::layer_norm", "aten::native_layer_norm"), _LN, 0.03, (16384, 256, 24, 0, 151.7, 1213.6, 100)),
    _k("qkv", ("aten::linear", "aten::addmm"), _GEMM, 0.19, (96, 256, 232, 98304, 0.89, 7.11, 12)),
    _k("attn", ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention"), _FLASH_FWD, 0.20, (16, 128, 255, 49152, 0.15, 0.59, 4)),
    _k("proj", ("aten::linear", "aten::addmm"), _GEMM, 0.08, (64, 256, 232, 98304, 0.59, 4.74, 8)),
    _k("add1", ("aten::add",), _ADD, 0.02, (4096, 128, 24, 0, 37.9, 151.7, 100)),
    _k("ln2", ("aten::layer_norm", "aten::native_layer_norm"), _LN, 0.03, (16384, 256, 24, 0, 151.7, 1213.6, 100)),
    _k("fc1", ("aten::linear", "aten::addmm"), _GEMM, 0.19, (256, 256, 232, 98304, 2.37, 18.96, 12), "[[8, 2048, 4096], [16384, 4096]]"),
    _k("gelu", ("aten::gelu",), _GELU, 0.04, (16384, 128, 28, 0, 151.7, 606.8, 100)),
    _k("fc2", ("aten::linear", "aten::addmm"), _GEMM, 0.19, (64, 256, 232, 98304, 0.59, 4.74, 12), "[[8, 2048, 16384], [4096, 16384]]"),
    _k("add2", ("aten::add",), _ADD, 0.03, (4096, 128, 24, 0, 37.9, 151.7, 100)),
)

# Backward of one block, full detail (run on the autograd thread; wrappers added by the builder)
BWD_FULL: tuple[KernelKind, ...] = (
    _k("fc2_dgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NN, 0.10, (256, 256, 232, 98304, 2.37, 18.96, 12)),
    _k("fc2_wgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NT, 0.10, (128, 256, 232, 98304, 1.19, 9.48, 12)),
    _k("gelu_bwd", ("GeluBackward0", "aten::gelu_backward"), _GELU_BWD, 0.04, (16384, 128, 30, 0, 151.7, 606.8, 100)),
    _k("fc1_dgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NN, 0.10, (64, 256, 232, 98304, 0.59, 4.74, 12)),
    _k("fc1_wgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NT, 0.10, (128, 256, 232, 98304, 1.19, 9.48, 12)),
    _k("ln2_bwd", ("NativeLayerNormBackward0", "aten::native_layer_norm_backward"), _LN_BWD, 0.04, (16384, 256, 32, 0, 151.7, 1213.6, 100)),
    _k("proj_dgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NN, 0.05, (64, 256, 232, 98304, 0.59, 4.74, 8)),
    _k("proj_wgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NT, 0.05, (64, 256, 232, 98304, 0.59, 4.74, 8)),
    _k("attn_bwd", ("ScaledDotProductFlashAttentionBackward0", "aten::_scaled_dot_product_flash_attention_backward"), _FLASH_BWD, 0.24, (32, 256, 255, 98304, 0.3, 2.37, 8)),
    _k("qkv_dgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NN, 0.08, (96, 256, 232, 98304, 0.89, 7.11, 12)),
    _k("qkv_wgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NT, 0.08, (96, 256, 232, 98304, 0.89, 7.11, 12)),
    _k("ln1_bwd", ("NativeLayerNormBackward0", "aten::native_layer_norm_backward"), _LN_BWD, 0.02, (16384, 256, 32, 0, 151.7, 1213.6, 100)),
)

# Leaner variants: fewer, longer kernels per layer (for larger jobs)
FWD_LEAN: tuple[KernelKind, ...] = (
    _k("qkv", ("aten::linear", "aten::addmm"), _GEMM, 0.25, FWD_FULL[1].geom),
    _k("attn", ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention"), _FLASH_FWD, 0.25, FWD_FULL[2].geom),
    _k("fc1", ("aten::linear", "aten::addmm"), _GEMM, 0.25, FWD_FULL[6].geom),
    _k("fc2", ("aten::linear", "aten::addmm"), _GEMM, 0.25, FWD_FULL[8].geom),
)
BWD_LEAN: tuple[KernelKind, ...] = (
    _k("fc2_dgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NN, 0.2, BWD_FULL[0].geom),
    _k("fc1_dgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NN, 0.2, BWD_FULL[3].geom),
    _k("attn_bwd", ("ScaledDotProductFlashAttentionBackward0", "aten::_scaled_dot_product_flash_attention_backward"), _FLASH_BWD, 0.3, BWD_FULL[8].geom),
    _k("qkv_wgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NT, 0.3, BWD_FULL[10].geom),
)
FWD_SPARSE: tuple[KernelKind, ...] = (
    _k("block", ("aten::linear", "aten::addmm"), _GEMM, 1.0, FWD_FULL[6].geom),
)
BWD_SPARSE: tuple[KernelKind, ...] = (
    _k("block_dgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NN, 0.5, BWD_FULL[0].geom),
    _k("block_wgrad", ("AddmmBackward0", "aten::mm"), _GEMM_NT, 0.5, BWD_FULL[1].geom),
)

DETAIL: dict[str, tuple[tuple[KernelKind, ...], tuple[KernelKind, ...]]] = {
    "full": (FWD_FULL, BWD_FULL),
    "lean": (FWD_LEAN, BWD_LEAN),
    "sparse": (FWD_SPARSE, BWD_SPARSE),
}

LOSS_FWD = _k("xent", ("aten::cross_entropy_loss", "aten::log_softmax", "aten::_log_softmax"), _XENT, 1.0, (16384, 1024, 40, 0, 18.9, 606.8, 88))
LOSS_BWD = _k("xent_bwd", ("LogSoftmaxBackward0", "aten::_log_softmax_backward_data"), _XENT_BWD, 1.0, (16384, 1024, 40, 0, 18.9, 606.8, 88))
OPT_NORM = _k("grad_norm", ("aten::_foreach_norm",), _NORM, 0.2, (320, 512, 32, 0, 2.96, 47.4, 65))
OPT_ADAM = _k("adam", ("aten::_fused_adamw_",), _ADAM, 0.8, (1280, 512, 64, 0, 11.85, 189.6, 48))
FILL = _k("fill", ("aten::zeros", "aten::zero_", "aten::fill_"), _FILL, 1.0, (1, 128, 16, 0, 0.01, 0.04, 0))


# -- NCCL kernels ----------------------------------------------------------------------------

#: (NCCL C++ op name, new-style has redop, element type kind)
_NCCL_OPS = {
    "allreduce": ("AllReduce", True),
    "allgather": ("AllGather", False),
    "reducescatter": ("ReduceScatter", True),
    "broadcast": ("Broadcast", False),
    "send": ("SendRecv", False),
    "recv": ("SendRecv", False),
}
_OLD_DTYPE = {"BFloat16": "__nv_bfloat16", "Float": "float", "Half": "half", "Long": "int64_t", "Byte": "int8_t"}
_NEW_DTYPE = {"BFloat16": "bf16", "Float": "f32", "Half": "f16", "Long": "i64", "Byte": "i8"}


def nccl_kernel_name(v: NcclVersion, op: str, dtype: str, algo: str, proto: str) -> str:
    """The kernel name CUPTI reports for one NCCL operation.

    >>> from stallscope.samples.versions import version
    >>> nccl_kernel_name(version("2.17.1"), "allreduce", "Float", "RING", "LL")
    'ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)'
    >>> nccl_kernel_name(version("2.21.5"), "allreduce", "BFloat16", "RING", "LL128")
    'ncclDevKernel_AllReduce_Sum_bf16_RING_LL128(ncclDevKernelArgsStorage<4096ul>)'
    >>> nccl_kernel_name(version("2.21.5"), "send", "BFloat16", "RING", "SIMPLE")
    'ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)'
    >>> nccl_kernel_name(version("2.10.3"), "recv", "BFloat16", "RING", "SIMPLE")
    'ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)'
    """
    cop, has_redop = _NCCL_OPS[op]
    if v.new_kernel_names:
        args = "(ncclDevKernelArgsStorage<4096ul>)"
        if cop == "SendRecv":
            return f"ncclDevKernel_SendRecv{args}"
        if has_redop:
            return f"ncclDevKernel_{cop}_Sum_{_NEW_DTYPE.get(dtype, 'f32')}_{algo}_{proto}{args}"
        return f"ncclDevKernel_{cop}_{algo}_{proto}{args}"
    args = "(ncclWorkElem)" if v < (2, 12, 0) else "(ncclDevComm*, unsigned long, ncclWork*)"
    if cop in ("SendRecv", "AllGather", "Broadcast"):
        return f"ncclKernel_{cop}_RING_{'SIMPLE' if cop == 'SendRecv' else proto}_Sum_int8_t{args}"
    return f"ncclKernel_{cop}_{algo}_{proto}_Sum_{_OLD_DTYPE.get(dtype, 'float')}{args}"


def nccl_algo_proto(op: str, nbytes: int, inter: bool, nranks: int) -> tuple[str, str]:
    """NCCL's usual choice: LL for small messages, LL128 for medium, SIMPLE for large; TREE for
    multi-node all-reduce of medium sizes."""
    if op in ("send", "recv"):
        return "RING", "SIMPLE"
    per_rank = nbytes / max(nranks, 1)
    proto = "LL" if per_rank < 16 << 10 else ("LL128" if per_rank < 2 << 20 else "SIMPLE")
    algo = "TREE" if (op == "allreduce" and inter and nbytes < 64 << 20 and nranks > 8) else "RING"
    return algo, proto
