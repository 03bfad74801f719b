"""ONNX export and int8 static quantization: readable node names, smaller model, real int8 kernels."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from torch import nn  # noqa: E402

from stallscope.compress.quantize import (  # noqa: E402
    export_onnx,
    file_size,
    layer_map,
    onnx_accuracy,
    quantize_int8,
    session,
)
from stallscope.compress.training import accuracy  # noqa: E402
from stallscope.errors import CompressError  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory, _trained_resnet, digits16):
    out = tmp_path_factory.mktemp("quant")
    fp32 = export_onnx(_trained_resnet, torch.from_numpy(digits16.x_train[:2]), out / "m.onnx")
    int8 = quantize_int8(fp32, out / "m.int8.onnx", digits16.x_train[:128])
    return fp32, int8


def test_export_names_nodes_after_pytorch_layers(exported, _trained_resnet):
    fp32, _ = exported
    names = [n.name for n in onnx.load(str(fp32)).graph.node]
    convs = [n for n in names if n.endswith("/Conv")]
    modules = {name for name, m in _trained_resnet.named_modules() if isinstance(m, nn.Conv2d)}
    # BatchNorm was folded into each conv by the exporter; the node still carries the conv's name
    assert {n.split("/")[0] for n in convs} == modules
    assert len(set(names)) == len(names)


def test_int8_model_is_smaller_runs_integer_kernels_and_keeps_accuracy(exported, _trained_resnet, digits16):
    fp32, int8 = exported
    assert file_size(int8) < 0.6 * file_size(fp32)  # QDQ scales and zero points cost a little
    graph = onnx.load(str(int8)).graph
    ops = {n.op_type for n in graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    weights = {i.name: i for i in graph.initializer}
    int8_weights = [w for w in weights.values() if w.data_type == onnx.TensorProto.INT8 and len(w.dims) == 4]
    assert int8_weights, "conv weights must be stored as int8"
    per_channel = [w for w in int8_weights if w.dims[0] > 1]
    assert per_channel
    fp32_acc = onnx_accuracy(fp32, digits16.x_val, digits16.y_val)
    int8_acc = onnx_accuracy(int8, digits16.x_val, digits16.y_val)
    assert fp32_acc == pytest.approx(accuracy(_trained_resnet, digits16.x_val, digits16.y_val), abs=0.01)
    assert int8_acc >= fp32_acc - 0.03
    # ORT fuses the QDQ pairs into integer convolutions
    sess = session(int8)
    out = sess.run(None, {"input": digits16.x_val[:3]})[0]
    assert out.shape == (3, 10)


def test_layer_map_walks_fused_names_back_to_the_conv(exported):
    fp32, _ = exported
    mapping = layer_map(fp32)
    graph = onnx.load(str(fp32)).graph
    relu_out = next(n.output[0] for n in graph.node if n.name.startswith("stages.0.0.relu/Relu") and n.name.endswith("Relu"))
    assert mapping[relu_out] == "stages.0.0.conv1"  # conv1 -> bn1 -> relu: ORT names the fused node after relu's output
    assert mapping["stem.0/Conv"] == "stem.0"


class _NoOnnxOp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.special.bessel_j0(x.flatten(1)))


def test_export_failure_is_one_clear_line(tmp_path):
    with pytest.raises(CompressError) as err:
        export_onnx(_NoOnnxOp().eval(), torch.randn(2, 1, 8, 8), tmp_path / "bad.onnx")
    message = str(err.value)
    assert message.startswith("ONNX export of the model failed:")
    assert "bessel_j0" in message
    assert "\n" not in message and "\x1b" not in message


def test_int8_saturation_follows_the_cpu_flags():
    """x86 without VNNI sums uint8 x int8 products in int16 (saturating): 7-bit weights there."""
    import platform

    from stallscope.compress.quantize import int8_products_saturate

    if platform.machine().lower() not in ("x86_64", "amd64"):
        assert not int8_products_saturate("flags\t\t: fp asimd\n")
        return
    assert int8_products_saturate("processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma\n")
    assert int8_products_saturate("flags\t\t: avx2 avx512f avx512bw\n")  # AVX-512 without VNNI saturates too
    assert not int8_products_saturate("flags\t\t: avx2 avx512f avx512_vnni\n")
    assert not int8_products_saturate("flags\t\t: avx2 avx_vnni\n")
    assert int8_products_saturate("")  # flags unknown: the safe choice
